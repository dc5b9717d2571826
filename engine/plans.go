package engine

import (
	"bytes"
	"fmt"
	"os"
	"sort"

	"github.com/gateway/gateway/domain"

	"github.com/goccy/go-json"
)

// Plans maps a plan name to its caps.
type Plans map[string]domain.Plan

// BuiltinDefaultPlan is the plan of new users when no --default-plan is given.
const BuiltinDefaultPlan = "free"

// DefaultPlans is the built-in plan table.
func DefaultPlans() Plans {
	return Plans{
		"free":      {RateLimit: 1000, MonthlyMessages: 1000},
		"starter":   {RateLimit: 10000, MonthlyMessages: 10000},
		"business":  {RateLimit: 100000, MonthlyMessages: 100000},
		"unlimited": {RateLimit: 0, MonthlyMessages: 0},
	}
}

// LoadPlans reads a plan table of the exact form
// {"<plan>": {"rate_limit": N, "monthly_messages": N}}; unknown fields are refused so a typo
// does not silently mean "no cap".
func LoadPlans(path string) (Plans, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("plans: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Plans
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("plans %s: %w", path, err)
	}
	if len(p) == 0 {
		return nil, fmt.Errorf("plans %s: no plans", path)
	}
	for name, pl := range p {
		if name == "" || pl.RateLimit < 0 || pl.MonthlyMessages < 0 {
			return nil, fmt.Errorf("plans %s: plan %q: caps must be 0 or more", path, name)
		}
	}
	return p, nil
}

// Resolve is the plan in force for a user whose profile names plan name: that plan, or def
// (the --default-plan, which the engine checks is in the table) when name is empty or no
// longer in the table. A plan removed from the table since the user was put on it must fail
// closed to the operator's default: the zero plan a missing entry would give means "no cap".
func (p Plans) Resolve(name, def string) (string, domain.Plan) {
	if pl, ok := p[name]; ok && name != "" {
		return name, pl
	}
	return def, p[def]
}

// Names lists the plan names in order.
func (p Plans) Names() []string {
	names := make([]string, 0, len(p))
	for n := range p {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
