package engine

import "github.com/gateway/gateway/persist"

// recordsOf hands persist's typed stores to the engine as main does (main.go, engineRecords).
func recordsOf(r *persist.Records) Records {
	return Records{Outbox: r.Outbox, Accounts: r.Accounts, Sessions: r.Sessions, Protections: r.Protections,
		Campaigns: r.Campaigns, Shops: r.Stores, Inbox: r.Inbox, History: r.History, Notes: r.Notes, StoreLoop: r.StoreLoop}
}
