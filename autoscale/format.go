package autoscale

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// count writes a rate or a number of records with three significant
// digits and a unit: 42000 as 42k, 9100 as 9.1k, 1234567 as 1.23M.
func count(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	if v < 1 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	// Round first, so that 999,960 becomes 1M rather than 1000k.
	p := math.Pow(10, math.Floor(math.Log10(v))-2)
	v = math.Round(v/p) * p
	units := []string{"", "k", "M", "G", "T"}
	u := 0
	for v >= 1000 && u < len(units)-1 {
		v /= 1000
		u++
	}
	decimals := max(0, 2-int(math.Floor(math.Log10(v))))
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s + units[u]
}

// dur writes a duration without zero trailing units: 5m rather than 5m0s.
func dur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// percent writes a fraction as a percentage: 0.2 as 20%.
func percent(f float64) string {
	return strconv.FormatFloat(math.Round(f*1000)/10, 'f', -1, 64) + "%"
}

// plural writes n and a noun that takes an s for any n but 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
