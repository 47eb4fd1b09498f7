package autoscale

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Config holds the rule's settings. Start from DefaultConfig and change
// what differs; New validates it.
type Config struct {
	// Headroom is the fraction of spare capacity kept above the rate the
	// group must sustain: 0.2 asks for capacity of 1.2 times that rate.
	// Default 0.2; at least 0 and at most 1.
	Headroom float64

	// OutWindow is how long a higher need must last before the
	// recommendation rises to it (short: out quickly, yet not on one noisy
	// sample). Zero scales out on the first evaluation that needs it.
	// Default 30s.
	OutWindow time.Duration

	// InWindow is how long a lower need must last before the
	// recommendation falls to it (long: in slowly). At least OutWindow.
	// Default 5m.
	InWindow time.Duration

	// DrainTime is the time within which a lag that is not draining
	// should be worked off: its records divided by DrainTime are added to
	// the rate to sustain. Default 2m; more than zero.
	DrainTime time.Duration

	// MinInstances and MaxInstances bound every recommendation. Default
	// 1 and 10; MinInstances is at least 1. More instances than tasks
	// divided by workers per instance leave workers idle, so MaxInstances
	// need be no higher.
	MinInstances int
	MaxInstances int

	// MaxStep is the most instances one recommendation adds or removes;
	// 0 (the default) sets no limit.
	MaxStep int
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		Headroom:     0.2,
		OutWindow:    30 * time.Second,
		InWindow:     5 * time.Minute,
		DrainTime:    2 * time.Minute,
		MinInstances: 1,
		MaxInstances: 10,
	}
}

// Errors returned by the package. Every validation error is a
// *FieldError wrapping one of these.
var (
	ErrInvalidConfig      = errors.New("autoscale: invalid config")
	ErrInvalidObservation = errors.New("autoscale: invalid observation")
)

// FieldError names the field of a Config or an Observation that is
// wrong and says why.
type FieldError struct {
	Field string // "Headroom", "InWindow", "Now", ...
	Msg   string
	kind  error
}

func (e *FieldError) Error() string { return e.kind.Error() + ": " + e.Field + ": " + e.Msg }

// Unwrap makes errors.Is(err, ErrInvalidConfig) or
// errors.Is(err, ErrInvalidObservation) true.
func (e *FieldError) Unwrap() error { return e.kind }

func configErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...), kind: ErrInvalidConfig}
}

func observationErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...), kind: ErrInvalidObservation}
}

// Validate reports the first field of c that is out of range, as a
// *FieldError wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	switch {
	case math.IsNaN(c.Headroom) || c.Headroom < 0 || c.Headroom > 1:
		return configErr("Headroom", "must be a fraction from 0 to 1 (0.2 keeps 20%% spare), got %v", c.Headroom)
	case c.OutWindow < 0:
		return configErr("OutWindow", "must not be negative, got %v", c.OutWindow)
	case c.InWindow < c.OutWindow:
		return configErr("InWindow", "must be at least OutWindow (%v), got %v: scale-in is the slow direction", c.OutWindow, c.InWindow)
	case c.DrainTime <= 0:
		return configErr("DrainTime", "must be more than zero, got %v", c.DrainTime)
	case c.MinInstances < 1:
		return configErr("MinInstances", "must be at least 1, got %d", c.MinInstances)
	case c.MaxInstances < c.MinInstances:
		return configErr("MaxInstances", "must be at least MinInstances (%d), got %d", c.MinInstances, c.MaxInstances)
	case c.MaxStep < 0:
		return configErr("MaxStep", "must not be negative (0 sets no limit), got %d", c.MaxStep)
	}
	return nil
}
