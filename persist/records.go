package persist

// Records is every typed store of the gateway on one KV: node builds them once and hands each
// to the part of the core that uses it, as the interface that part declares (engine.Store,
// engine.Records, engine.EventStore). Nothing above persist sees the KV.
type Records struct {
	Store       *Store
	Outbox      *Outbox
	Accounts    Accounts
	Sessions    Sessions
	Protections Protections
	Campaigns   *Campaigns
	Stores      *Stores
	Inbox       *Inbox
	Webhooks    *Webhooks
	History     *MessageLog
	Notes       *MessageNotes
	StoreLoop   *StoreLoop
	// The Cloud API's (cloud.go).
	SendLog        SendLog
	CloudTemplates CloudTemplates
	Routings       Routings
	Windows        Windows
	// The Cloud-API-shaped front's uploads (frontmedia.go).
	FrontMedia FrontMedia
}

// NewRecords builds every typed store on kv.
func NewRecords(kv KV) *Records {
	return &Records{
		Store:       NewStore(kv),
		Outbox:      NewOutbox(kv),
		Accounts:    NewAccounts(kv),
		Sessions:    NewSessions(kv),
		Protections: NewProtections(kv),
		Campaigns:   NewCampaigns(kv),
		Stores:      NewStores(kv),
		Inbox:       NewInbox(kv),
		Webhooks:    NewWebhooks(kv),
		History:     NewMessageLog(kv),
		Notes:       NewMessageNotes(kv),
		StoreLoop:   NewStoreLoop(kv),

		SendLog:        NewSendLog(kv),
		CloudTemplates: NewCloudTemplates(kv),
		Routings:       NewRoutings(kv),
		Windows:        NewWindows(kv),
		FrontMedia:     NewFrontMedia(kv),
	}
}
