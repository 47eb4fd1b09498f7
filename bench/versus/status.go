package versus

import (
	"encoding/json"
	"fmt"
	"strings"
)

// StatusLine is the JSON line every engine prints on stdout once a second
// (compare/README.md, "The contract every peer keeps").
type StatusLine struct {
	Engine   string `json:"engine"`
	Instance string `json:"instance"`
	// Process is the engine's own id of the instance, where its assignor
	// orders instances by it (Kafka Streams' process id); "" if not given.
	Process string   `json:"process,omitempty"`
	TimeMS  int64    `json:"time_ms"`
	State   string   `json:"state"`
	Active  []string `json:"active"`
	Standby []string `json:"standby"`
	Warmup  []string `json:"warmup"`
	// Restoring lists active tasks still restoring their state, which
	// Active leaves out; engines that do not list them (Kafka Streams
	// lists a restoring task nowhere) leave it empty.
	Restoring []string `json:"restoring,omitempty"`
	// Processed counts input records (lines) this instance processed
	// since it started.
	Processed int64 `json:"processed"`
	// Restored counts changelog records this instance restored into the
	// stores of its active tasks since it started (not what standby or
	// warm-up replicas read). nil means the engine does not observe it:
	// the field was absent or -1 on the wire.
	Restored *int64 `json:"restored,omitempty"`
	// RestoreMS is the wall time in milliseconds, since the instance
	// started, during which it was restoring the stores of at least one
	// active task; nil if the engine does not give it.
	RestoreMS *int64 `json:"restore_ms,omitempty"`
}

// ParseStatusLine decodes one stdout line of an engine. A line that is not
// a JSON object is not a status line: ok is false and err nil, so engines
// may print other lines. A JSON object without engine or instance is an
// error naming what is missing.
func ParseStatusLine(line string) (s StatusLine, ok bool, err error) {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "{") {
		return StatusLine{}, false, nil
	}
	if err := json.Unmarshal([]byte(line), &s); err != nil {
		return StatusLine{}, false, fmt.Errorf("versus: status line %q: %w", clip(line), err)
	}
	if s.Engine == "" || s.Instance == "" {
		return StatusLine{}, false, fmt.Errorf("versus: status line %q: engine and instance are required", clip(line))
	}
	if s.Restored != nil && *s.Restored < 0 {
		if *s.Restored != -1 {
			return StatusLine{}, false, fmt.Errorf("versus: status line %q: restored is %d: it is a count, or -1 when not observed", clip(line), *s.Restored)
		}
		s.Restored = nil
	}
	if s.RestoreMS != nil && *s.RestoreMS < 0 {
		if *s.RestoreMS != -1 {
			return StatusLine{}, false, fmt.Errorf("versus: status line %q: restore_ms is %d: it is a duration, or -1 when not observed", clip(line), *s.RestoreMS)
		}
		s.RestoreMS = nil
	}
	return s, true, nil
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
