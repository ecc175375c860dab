package transform

import "time"

// Limits bound what rules may cost; zero fields take the defaults. They
// hold against adversarial rules: a source's annotations are written by
// whoever may edit the source, and the agent that runs the rules serves
// every namespace and cluster.
type Limits struct {
	// MaxRules is the most rules an annotation may hold (default 50).
	MaxRules int
	// MaxBytes is the most bytes of rule text (default 10 KiB).
	MaxBytes int
	// Timeout bounds one template execution (default 100ms).
	Timeout time.Duration
	// MaxOutput bounds, in bytes, what one template execution may produce,
	// intermediate function results included, and the JSON size of an
	// object after all its rules (default 1 MiB).
	MaxOutput int
}

// DefaultLimits returns the limits the issue sets: 50 rules, 10 KiB of rule
// text, 100ms per template execution, 1 MiB per object.
func DefaultLimits() Limits {
	return Limits{
		MaxRules:  50,
		MaxBytes:  10 << 10,
		Timeout:   100 * time.Millisecond,
		MaxOutput: 1 << 20,
	}
}

// withDefaults returns l with each zero or negative field replaced by its
// default.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxRules <= 0 {
		l.MaxRules = d.MaxRules
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = d.MaxBytes
	}
	if l.Timeout <= 0 {
		l.Timeout = d.Timeout
	}
	if l.MaxOutput <= 0 {
		l.MaxOutput = d.MaxOutput
	}
	return l
}
