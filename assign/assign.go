package assign

import "fmt"

// Assign computes the plan for state s under policy p. It validates s
// first; an invalid state returns an error wrapping ErrInvalidState.
// Assign is pure: no clock, no I/O, no memory between calls (working
// arrays are reused, cleared, through a pool); the same state gives the
// same plan whatever the order of its lists.
func Assign(s State, p Policy) (Plan, error) {
	sc := getScratch()
	defer sc.release()
	g, err := build(s, sc)
	if err != nil {
		return Plan{}, err
	}
	switch p {
	case Smooth, Cooperative:
		return planIncremental(g, p), nil
	case Eager:
		return planEager(g), nil
	}
	return Plan{}, fmt.Errorf("%w: %q", ErrUnknownPolicy, p)
}
