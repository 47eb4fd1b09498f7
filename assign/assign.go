package assign

import "fmt"

// Assign computes the plan for state s under policy p. It validates s
// first; an invalid state returns an error wrapping ErrInvalidState.
// Assign is pure: no clock, no I/O, no memory between calls; the same
// state gives the same plan whatever the order of its lists.
func Assign(s State, p Policy) (Plan, error) {
	tidx, err := validate(s)
	if err != nil {
		return Plan{}, err
	}
	switch p {
	case Smooth, Cooperative:
		return planIncremental(newGroup(s, tidx), p), nil
	case Eager:
		return planEager(newGroup(s, tidx)), nil
	}
	return Plan{}, fmt.Errorf("%w: %q", ErrUnknownPolicy, p)
}
