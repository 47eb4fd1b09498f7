// The page polls /group and redraws. No framework and no build step: the
// file is served as written, embedded in the binary.
"use strict";

const params = new URLSearchParams(location.search);
const every = Math.max(100, Number(params.get("poll")) || 1000);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(typeof c === "string" || typeof c === "number" ? String(c) : c);
  }
  return e;
}

function text(id, value) {
  document.getElementById(id).textContent = value;
}

function fmt(n) {
  return Number(n).toLocaleString("en-US");
}

function taskView(instance, t) {
  const restoring = t.role === "active" && t.lag > 0;
  const chip = el("span", { class: "chip" + (restoring ? " restoring" : ""), "data-role": t.role, title: t.role + (restoring ? ", restoring" : "") }, t.id);
  const box = el("div", { class: "task", "data-task": t.id, "data-role": t.role, "data-instance-task": instance.id + "/" + t.id }, chip);
  if (t.role !== "active" || t.lag > 0) {
    const pct = Math.round(100 * Math.min(1, Math.max(0, t.progress)));
    const bar = el("div", { class: "bar", title: pct + "% restored" }, el("span"));
    bar.firstChild.style.width = pct + "%";
    box.append(bar, el("span", { class: "lag", "data-lag": t.lag }, "lag " + fmt(t.lag)));
  } else {
    const behind = t.input && t.input.records > 0 ? " · behind " + fmt(t.input.records) + " (" + t.input.seconds.toFixed(1) + " s)" : "";
    const load = t.load > 0 ? " · load " + Math.round(100 * t.load) + "%" : "";
    box.append(el("span", { class: "lag", "data-input-lag": t.input ? t.input.records : null, "data-load": t.load > 0 ? t.load : null, title: "load: share of a worker's time, smoothed" }, fmt(t.processed) + " rec" + load + behind));
  }
  return box;
}

// restoreText is an instance's restores in its header: their rate over
// the last 30 s while they run, else what they restored in all, and how
// long warm copies' restores gave way to busy active tasks; nothing
// while it never restored.
function restoreText(r) {
  if (!r || (r.records === 0 && r.yielded_seconds === 0)) return "";
  let s = r.rate >= 1 ? "restoring " + fmt(Math.round(r.rate)) + " rec/s" : "restored " + fmt(r.records) + " records";
  if (r.yielded_seconds > 0) s += ", yielded " + r.yielded_seconds.toFixed(2) + " s to active tasks";
  return s;
}

function instanceView(inst) {
  const unreachable = inst.source !== "status";
  const card = el("article", { class: "instance" + (unreachable ? " unreachable" : ""), "data-instance": inst.id },
    el("h3", null, inst.id,
      inst.leader ? el("span", { class: "badge leader" }, "leader") : null,
      inst.self ? el("span", { class: "badge self" }, "this instance") : null,
      inst.leaving ? el("span", { class: "badge leaving" }, "leaving") : null,
      inst.unconfirmed ? el("span", { class: "badge leaving", title: "the group has not confirmed this member lately: its active tasks may already run elsewhere" }, "unconfirmed") : null,
      inst.member ? null : el("span", { class: "badge" }, "not in group")),
    el("div", { class: "meta" }, [inst.endpoint || "no endpoint", inst.workers + " worker" + (inst.workers === 1 ? "" : "s"),
      inst.worker_rate > 0 ? fmt(Math.round(inst.worker_rate)) + " rec/s per busy worker" : "", restoreText(inst.restore),
      inst.rack ? "rack " + inst.rack : ""].filter(Boolean).join(" · ")));
  const tasks = el("div", { class: "tasks" });
  if (inst.tasks.length === 0) tasks.append(el("span", { class: "empty" }, "no tasks"));
  for (const t of inst.tasks) tasks.append(taskView(inst, t));
  card.append(tasks);
  if (inst.error) card.append(el("div", { class: "note" }, inst.error));
  return card;
}

function moves(label, list, arrow) {
  if (!list || list.length === 0) return null;
  return el("div", { class: "moves" }, el("b", null, label + ": "), list.map(m => m.task + arrow + m.instance).join(", "));
}

function rebalanceView(r) {
  const reasons = el("ul", { class: "reasons" });
  for (const why of r.reasons || []) reasons.append(el("li", null, why));
  const quiet = !r.revoked.length && !r.learners.length && !r.orphans.length;
  const learners = r.learners.map(m => m.instance + "/" + m.task).join(" ");
  return el("li", { "data-generation": r.generation, "data-learners": learners },
    el("div", null, el("b", null, "generation " + r.generation), " ",
      el("span", { class: "when" }, new Date(r.time).toLocaleTimeString() + " · leader " + (r.leader || "?") + (r.followup ? " · follow-up" : ""))),
    moves("revoked", r.revoked, " from "),
    moves("learners", r.learners, " on "),
    moves("orphans placed", r.orphans, " → "),
    quiet ? el("div", { class: "moves empty" }, "nothing moved") : null,
    reasons.children.length ? reasons : null);
}

function render(v) {
  text("app", v.app_id);
  text("self", v.self);
  text("generation", v.generation);
  text("leader", v.leader || "unknown");
  text("group-state", v.group_state || "unknown");
  text("updated", new Date(v.observed).toLocaleTimeString());
  const input = v.input;
  text("input-lag", fmt(input.records) + " records, " + input.seconds.toFixed(1) + " s" + (input.partial ? " (partial)" : ""));
  text("input-rate", fmt(Math.round(input.rate)) + " records/s");
  const desired = document.getElementById("desired");
  desired.textContent = v.autoscale ? String(v.autoscale.desired_instances) : "unknown";
  desired.title = v.autoscale ? v.autoscale.reason : "published by the group's leader";
  const err = document.getElementById("error");
  err.hidden = !v.group_error;
  err.textContent = v.group_error ? "The group could not be read from the cluster: " + v.group_error : "";

  document.getElementById("instances").replaceChildren(...v.instances.map(instanceView));

  const plan = document.getElementById("plan");
  text("plan-gen", v.plan ? "generation " + v.plan.generation + (v.plan.followup ? ", follow-up wanted" : "") : "");
  if (!v.plan) plan.replaceChildren(el("li", { class: "empty" }, "no plan seen (leader unknown or unreachable)"));
  else if (!v.plan.reasons || v.plan.reasons.length === 0) plan.replaceChildren(el("li", { class: "empty" }, "nothing to move: the group is balanced"));
  else plan.replaceChildren(...v.plan.reasons.map(r => el("li", null, r)));

  const tl = document.getElementById("timeline");
  if (v.timeline.length === 0) tl.replaceChildren(el("li", { class: "empty" }, "none seen yet"));
  else tl.replaceChildren(...v.timeline.map(rebalanceView));
  document.body.dataset.generation = v.generation;
  queryBoxes(v.stores);
}

// queryBoxes draws, once, a box per store that reads a key through this
// instance's GET /query (which asks the instance holding the task).
let queriesDrawn = false;
function queryBoxes(stores) {
  if (queriesDrawn || !stores || stores.length === 0) return;
  queriesDrawn = true;
  document.getElementById("queries").replaceChildren(...stores.map(store => {
    const key = el("input", { type: "text", placeholder: "key", "data-query-key": store });
    const lag = el("input", { type: "number", min: "0", placeholder: "max lag", title: "let a learner or standby this many records behind answer (empty: the active only)", "data-query-lag": store });
    const out = el("p", { class: "answer", "data-query-answer": store });
    const form = el("form", { class: "query", "data-query": store }, el("label", null, store + " "), key, lag, el("button", { type: "submit" }, "read"), out);
    form.addEventListener("submit", async ev => {
      ev.preventDefault();
      const q = new URLSearchParams({ timeout: "5s" });
      if (lag.value !== "") q.set("max-lag", lag.value);
      out.textContent = "…";
      try {
        const resp = await fetch("/query/" + encodeURIComponent(store) + "/" + encodeURIComponent(key.value) + "?" + q, { cache: "no-store" });
        const a = await resp.json();
        if (!resp.ok) { out.className = "answer failed"; out.textContent = resp.status + ": " + a.error; return; }
        out.className = "answer";
        out.textContent = (a.found ? (a.value !== undefined ? a.value : "(binary) " + a.value_base64) : "not found") +
          " (task " + a.task + ", " + a.role + " on " + a.instance + ", lag " + fmt(a.lag) + ", changelog offset " + fmt(a.offset) + ")";
      } catch (e) {
        out.className = "answer failed";
        out.textContent = e.message;
      }
    });
    return form;
  }));
}

async function poll() {
  try {
    const resp = await fetch("/group", { cache: "no-store" });
    if (!resp.ok) throw new Error("GET /group: " + resp.status);
    render(await resp.json());
  } catch (e) {
    const err = document.getElementById("error");
    err.hidden = false;
    err.textContent = "This instance did not answer (" + e.message + "); retrying.";
  } finally {
    setTimeout(poll, every);
  }
}
poll();
