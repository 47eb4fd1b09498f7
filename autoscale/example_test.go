package autoscale_test

import (
	"fmt"
	"time"

	"github.com/baton-streams/baton/autoscale"
)

func Example() {
	r, err := autoscale.New(autoscale.DefaultConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	instances := 3
	// The input doubles at 20s and stays up; evaluations every 10s.
	for s := 0; s <= 60; s += 10 {
		input := 21000.0
		if s >= 20 {
			input = 42000
		}
		rec, err := r.Recommend(autoscale.Observation{
			Now:                t0.Add(time.Duration(s) * time.Second),
			Instances:          instances,
			WorkersPerInstance: 1,
			InputRate:          input,
			WorkerRate:         9100,
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%ds: %d\n    %s\n", s, rec.Instances, rec.Reason)
		instances = rec.Instances
	}
	// Output:
	// 0s: 3
	//     input 21k records/s; one worker sustains 9.1k/s; 20% headroom: 3 instances; hold 3
	// 10s: 3
	//     input 21k records/s; one worker sustains 9.1k/s; 20% headroom: 3 instances; hold 3
	// 20s: 3
	//     input 42k records/s; one worker sustains 9.1k/s; 20% headroom: 6 instances; hold 3: 6 needed now; scale-out waits for 30s of history (have 20s)
	// 30s: 3
	//     input 42k records/s; one worker sustains 9.1k/s; 20% headroom: 6 instances; hold 3: 6 needed now but not throughout the 30s out-window
	// 40s: 3
	//     input 42k records/s; one worker sustains 9.1k/s; 20% headroom: 6 instances; hold 3: 6 needed now but not throughout the 30s out-window
	// 50s: 6
	//     input 42k records/s; one worker sustains 9.1k/s; 20% headroom: 6 instances; scale out 3 → 6: at least 6 needed throughout the 30s out-window
	// 60s: 6
	//     input 42k records/s; one worker sustains 9.1k/s; 20% headroom: 6 instances; hold 6
}
