//go:build !linux

package bench

import (
	"errors"
	"time"
)

var errNoUsage = errors.New("peak RSS is measured on Linux only")

func cpuTime() time.Duration { return 0 }

func resetPeakRSS() error { return errNoUsage }

func peakRSS() (int64, error) { return 0, errNoUsage }

func rss() (int64, error) { return 0, errNoUsage }
