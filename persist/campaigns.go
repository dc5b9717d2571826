package persist

import (
	"context"
	"fmt"
	"time"

	"github.com/gateway/gateway/domain"
)

// Campaign retention once ended (the record), and of the per-number details.
const (
	CampaignRetention = 30 * 24 * time.Hour
	DetailRetention   = 90 * 24 * time.Hour
)

// Campaigns keeps "campaign/<id>" (the record) and "campaign_detail/<id>/<index>" (one
// number's outcome each): the campaign actors' storage (actors/campaign.Store).
type Campaigns struct {
	records *Table[domain.Campaign]
	details *Table[domain.CampaignDetail]
	idem    *Table[domain.IdemRecord] // the Outbox's idempotency records
}

// NewCampaigns returns the campaign store on kv.
func NewCampaigns(kv KV) *Campaigns {
	return &Campaigns{
		records: NewTable[domain.Campaign](kv, campaignTable, 1),
		details: NewTable[domain.CampaignDetail](kv, campaignDetails, 1),
		idem:    NewTable[domain.IdemRecord](kv, idemTable, recordVersion1),
	}
}

// Accept writes a new campaign's record and, when idemID is not empty, the idempotency record
// of the request that made it, in one commit (a retry after a crash finds both or neither).
func (c *Campaigns) Accept(ctx context.Context, s domain.Campaign, idemID string, rec domain.IdemRecord) error {
	if idemID == "" {
		return c.save(ctx, s, nil, false)
	}
	op, err := c.idem.PutTTLOp(idemID, rec, domain.IdempotencyTTL)
	if err != nil {
		return err
	}
	return c.save(ctx, s, nil, false, op)
}

func detailID(campaignID string, idx int) string { return fmt.Sprintf("%s/%06d", campaignID, idx) }

// SaveCampaign writes the record and, in the same commit, one number's detail (the number
// before the cursor). final: the campaign has ended (its record expires after
// CampaignRetention).
func (c *Campaigns) SaveCampaign(ctx context.Context, s domain.Campaign, d *domain.CampaignDetail, final bool) error {
	return c.save(ctx, s, d, final)
}

// save is SaveCampaign with extra writes in the same commit (a new campaign's idempotency
// record).
func (c *Campaigns) save(ctx context.Context, s domain.Campaign, d *domain.CampaignDetail, final bool, extra ...Op) error {
	ops := extra
	var rec Op
	var err error
	if final {
		rec, err = c.records.PutTTLOp(s.ID, s, CampaignRetention)
	} else {
		rec, err = c.records.PutOp(s.ID, s)
	}
	if err != nil {
		return err
	}
	ops = append(ops, rec)
	if d != nil {
		op, err := c.details.PutTTLOp(detailID(s.ID, s.Cursor-1), *d, DetailRetention)
		if err != nil {
			return err
		}
		ops = append(ops, op)
	}
	return c.records.KV().Commit(ctx, ops...)
}

// LoadCampaign reads a campaign and its details.
func (c *Campaigns) LoadCampaign(id string) (domain.Campaign, error) {
	s, err := c.records.Get(id)
	if err != nil {
		return s, err
	}
	err = c.details.Scan(id+"/", func(_ string, d domain.CampaignDetail) error {
		s.Details = append(s.Details, d)
		return nil
	})
	return s, err
}

// Each calls fn for every stored campaign record (details not read), in id order.
func (c *Campaigns) Each(fn func(domain.Campaign) error) error {
	return c.records.Scan("", func(_ string, s domain.Campaign) error { return fn(s) })
}
