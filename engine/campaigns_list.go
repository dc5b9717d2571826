package engine

import (
	"slices"
	"strings"

	"github.com/gateway/gateway/domain"
)

// List returns the user's campaigns, newest first, at most max (0: 100), without their
// per-number details: the running ones as they stand, the ended ones as stored (kept 30 days).
// It scans the campaign records, which is fine for a dashboard's list; a user with thousands
// of campaigns a month would want an index by owner.
func (cs *Campaigns) List(uid string, max int) ([]domain.Campaign, error) {
	if max <= 0 {
		max = 100
	}
	byID := map[string]domain.Campaign{}
	err := cs.store.Each(func(c domain.Campaign) error {
		if c.UserID == uid {
			byID[c.ID] = c
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	cs.idx.each(func(id string, ent *campaignEntry) bool {
		if v := ent.view.Load(); v != nil && v.UserID == uid {
			byID[id] = *v
		}
		return true
	})
	out := make([]domain.Campaign, 0, len(byID))
	for _, c := range byID {
		c.Details = nil
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b domain.Campaign) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out[:min(len(out), max)], nil
}
