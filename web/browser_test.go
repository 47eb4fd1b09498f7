package web

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/baton-streams/baton/internal/tick"
)

// chromium returns the path of Debian's chromium. The test is skipped when
// it is missing, unless BATON_REQUIRE_BROWSER is set (CI sets it: there a
// missing browser is a failure, not a reason to pass).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("BATON_REQUIRE_BROWSER") != "" {
		t.Fatal("BATON_REQUIRE_BROWSER is set but no chromium is on PATH (apt-get install -y chromium)")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium); set BATON_REQUIRE_BROWSER=1 to make this a failure")
	return ""
}

// pageState is what the test reads off the rendered page.
type pageState struct {
	Instances []string            `json:"instances"`
	Roles     map[string][]string `json:"roles"` // instance -> "task:role" as drawn
	Timeline  int                 `json:"timeline"`
	// Planned lists "instance/task" for every learner the timeline shows.
	Planned []string `json:"planned"`
	// Meta is each instance card's header line (endpoint, workers,
	// rates, restores).
	Meta map[string]string `json:"meta"`
}

const readPage = `(() => {
  const entries = [...document.querySelectorAll("#timeline li[data-generation]")];
  const out = {instances: [], roles: {}, meta: {}, timeline: entries.length,
    planned: entries.flatMap(e => (e.dataset.learners || "").split(" ").filter(Boolean))};
  for (const card of document.querySelectorAll("#instances [data-instance]")) {
    const id = card.dataset.instance;
    out.instances.push(id);
    out.roles[id] = [...card.querySelectorAll(".task[data-task]")].map(t => t.dataset.task + ":" + t.dataset.role);
    out.meta[id] = card.querySelector(".meta")?.textContent || "";
  }
  return out;
})()`

func (s pageState) has(instance, role, prefix string) bool {
	for _, tr := range s.Roles[instance] {
		task, r, _ := strings.Cut(tr, ":")
		if r == role && strings.HasPrefix(task, prefix) {
			return true
		}
	}
	return false
}

func (s pageState) anyLearner() bool {
	for id := range s.Roles {
		if s.has(id, "learner", "") {
			return true
		}
	}
	return false
}

// TestBrowserLearnerBecomesActive loads instance a's page in headless
// chromium while a third instance joins a group of two with real state,
// and watches the page show a learner on the newcomer, then the task
// active there. BATON_SCREENSHOT=docs/page.png (relative to the
// repository root) saves the page as the learner shows.
func TestBrowserLearnerBecomesActive(t *testing.T) {
	browser := chromium(t)
	if testing.Short() {
		t.Skip("starts a cluster, three instances and a browser")
	}
	g := newGroup(t)
	g.prefill(200_000)
	a := g.start("a")
	g.start("b")

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(browser), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 900))
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelTimeout()
	if err := chromedp.Do(ctx, chromedp.Navigate(a.url+"/?poll=150")); err != nil {
		t.Fatalf("loading the page: %v", err)
	}

	var last pageState
	read := func() pageState {
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](readPage))
		if err != nil {
			t.Fatalf("reading the page: %v (last seen %+v)", err, last)
		}
		var s pageState
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("decoding the page: %v", err)
		}
		last = s
		return s
	}
	waitPage := func(timeout time.Duration, what string, cond func(pageState) bool) {
		t.Helper()
		if !tick.Until(context.Background(), timeout, 50*time.Millisecond, func() bool { return cond(read()) }) {
			t.Fatalf("timed out after %v waiting for the page to show %s; it shows %+v", timeout, what, last)
		}
	}

	// Two instances, every count task active on one of them, no learner.
	waitPage(90*time.Second, "a and b running all four count tasks", func(s pageState) bool {
		n := 0
		for _, id := range []string{"a", "b"} {
			for _, tr := range s.Roles[id] {
				if strings.HasPrefix(tr, "1_") && strings.HasSuffix(tr, ":active") {
					n++
				}
			}
		}
		return len(s.Instances) == 2 && n == 4 && !s.anyLearner()
	})

	t.Logf("page before c joins: %+v", last)
	g.start("c")
	// The learner shows on c's card while it restores; when it restores
	// faster than the page polls (a loaded machine), the rebalance
	// timeline still shows it placed on c. Either is the page showing it.
	waitPage(60*time.Second, "a learner on c", func(s pageState) bool {
		if s.has("c", "learner", "1_") {
			return true
		}
		for _, p := range s.Planned {
			if strings.HasPrefix(p, "c/1_") {
				t.Logf("the learner on c restored between two polls; the timeline shows it placed")
				return true
			}
		}
		return false
	})
	t.Logf("page with the learner: %+v", last)
	if path := os.Getenv("BATON_SCREENSHOT"); path != "" {
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if !filepath.IsAbs(path) {
			path = filepath.Join("..", path)
		}
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot written to %s", path)
	}
	waitPage(90*time.Second, "a count task active on c and no learner left", func(s pageState) bool {
		return s.has("c", "active", "1_") && !s.anyLearner()
	})
	t.Logf("page after the handover: %+v", last)
	// c restored its learner: its card says so (its /status's restores).
	waitPage(30*time.Second, "c's restores in its card", func(s pageState) bool { return strings.Contains(s.Meta["c"], "restor") })
	if last.Timeline == 0 {
		t.Errorf("the page shows no rebalance in its timeline: %+v", last)
	}

	// The query box reads a word's count wherever its task runs: w7 was
	// written once, and a forwards the read when the task is not its own.
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(`input[data-query-key="counts"]`, "w7"),
		chromedp.Click(`form[data-query="counts"] button`),
	); err != nil {
		t.Fatalf("querying through the page: %v", err)
	}
	var answer string
	if !tick.Until(context.Background(), 30*time.Second, 50*time.Millisecond, func() bool {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-query-answer="counts"]').textContent`))
		if err != nil {
			t.Fatalf("reading the query box: %v", err)
		}
		answer = got
		return got != "" && got != "…"
	}) {
		t.Fatalf("the query box showed no answer: %q", answer)
	}
	if !strings.HasPrefix(answer, "1 (task 1_") || !strings.Contains(answer, "active on ") {
		t.Errorf("the query box answered %q; want w7's count 1 from its active", answer)
	}
	t.Logf("query box: %s", answer)
}
