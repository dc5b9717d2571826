package persist

import (
	"context"
	"errors"
	"time"
)

// Contacts is the contact book of the new-contact pacing cap: "contact/<sessionID>/<phone>"
// holds the day the session first wrote to the number.
type Contacts struct{ t *Table[string] }

// NewContacts returns the contact book on kv.
func NewContacts(kv KV) Contacts { return Contacts{NewTable[string](kv, contactTable, 1)} }

// Known tells whether the session wrote to phone before.
func (c Contacts) Known(sessionID, phone string) (bool, error) {
	_, err := c.t.Get(sessionID + "/" + phone)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Remember records phone as known to the session.
func (c Contacts) Remember(sessionID, phone string) error {
	return c.t.Put(context.Background(), sessionID+"/"+phone, time.Now().UTC().Format(time.DateOnly))
}
