package persist

// The key schema: every table and index the gateway keeps, in one place. A table is
// "<name>/<id>" holding a record encoded with its version (codec.go); TTL is how long a record
// lives after its last write (0 = until deleted).
//
//	table                          record (version)          TTL       written by
//	user/<uid>                     domain.User (1)           -         users
//	apikey/<keyID>                 domain.APIKey (1)         -         keys
//	apikey_hash/<sha256 hex>       key id (raw)              -         keys (unique index)
//	apikey_owner/<uid> NUL <keyID> empty                     -         keys (index by owner)
//	apikey_usage/<keyID>           domain.KeyUsage (1)       -         key actor (block marks)
//	account/<uid>                  domain.Allowance (1)      -         account actor
//	session/<sessionID>            domain.Session (1)        -         session actor
//	msg_log/<uid>/<ms>/out/<msgID> accept record (3): the    14 days   accept (outbox.go): ONE record
//	                               message as accepted, its            per accepted message, listed by
//	                               Idempotency-Key's body hash         the history (messages.go)
//	outbox_status/<msgID>          outcome (2): with where   7 days    the deliverer's outcome (no body)
//	                               the body is (uid, ms)
//	outbox_page/<window>/<random>  outcomes (1): many, each  7 days    the outcome writer, on a store
//	                               its id and its status               that pages them (NATS; ids the
//	                               record                              outbox minted: outbox_nats.go)
//	outbox_receipt/<msgID>/<st>    domain.StatusChange (1)   7 days    receipts: delivered, read
//	outbox_pending/<msgID>         pending mark (3): where   -         Checkpoint, for a message pending
//	                               the body is, its expiry             30 s and more; removed with its
//	                                                                   outcome
//	outbox_checkpoint/pending      the oldest unmarked       -         Checkpoint (every 5 s): boot reads
//	                               pending accept (ms)                 the accepts from it on
//	outbox_checkpoint/floor        the accepts' floor (1):   -         Checkpoint, on a store that stamps
//	                               ms on the store's clock             its records (NATS): boot reads the
//	                                                                   accepts written since it
//	outbox/<msgID>                 the older layout's body   14 days   read; version 1 the whole entry,
//	                               (2)                                 version 2 the message as accepted
//	outbox_pending/<msgID>         older marks: 1 (the       -         moved to this layout by
//	                               whole entry), 2 (expiry)            Outbox.Pending at boot
//	idem/<keyID>/<Idempotency-Key> IdemRecord (1)            24 h      a campaign's accept (a message's
//	                                                                   is in its accept record)
//	protect/<sid>/<phone>          domain.Protections (1)    -         session actor (DESIGN.md section 14)
//	contact_book/<sid>/<phone>/<n> domain.Contact (1)        -         session actor (first messages, replies)
//	recipient_mark/<sid>/<phone>/<n> domain.RecipientMark (1) until its end  session actor (463 twice)
//	contact/<sessionID>/<phone>    retired (the book was per session, not per linked phone; never read)
//	campaign/<id>                  domain.Campaign (1)       30 days   campaign actor (TTL once ended)
//	campaign_detail/<id>/<index>   domain.CampaignDetail (1) 90 days   campaign actor
//	msg_log/<uid>/<ms>/<dir>/<id>  LogEntry (1), out: the    7 days    saving an incoming message (in);
//	                               accept record (3)         (14 d)    out: the outbox's accept (above)
//	                               (messages.go: uid path-escaped, ms 13 digits, dir out|in; an
//	                               incoming one is .../in/<id>/<session>, before: .../in/<id>)
//	msg_in/<uid>/<id>/<session>    the msg_log key after     7 days    saving an incoming message (its
//	                               the user's prefix (raw)             id → its entry: replies, reads);
//	                                                                   msg_in/<uid>/<id>: read, and written
//	                                                                   for an id's first copy (a node of the
//	                                                                   release before checks only it)
//	msg_note/<uid>/<id>            domain.MessageNotes (1)   7 days    engine: reactions, edit, revoke,
//	                                                                   poll votes (notes.go)
//	net_send/, net_id/, cloud_template/, routing/, cloud_window/: the Cloud API's (cloud.go)
//	front_media/<mediaID>: the Cloud-API-shaped front's uploads, 30 days (frontmedia.go)
//	inbox/, webhook_seen/, store_sent/, store_event/, store/, nonces, templates: see inbox.go
//	and stores.go (the store integration's tables); store_order/, store_answer/,
//	store_writeback/, store_checkout/, optout/: see storeloop.go (the store loop).
//	outbox/<msgID>'s body carries sendAt (a message sent later: scheduled until then).
//	webhook_*/: see webhooks.go; event_log/ (24 h), event_out/ (7 days), event_epoch/: the
//	event journal and the broker outbox; event_final/ (7 days): a message's failed or
//	cancelled status kept with its event until its record; see events_log.go.
const (
	usersTable         = "user"
	keysTable          = "apikey"
	keyHashIndex       = "apikey_hash/"
	keyOwnerIndex      = "apikey_owner/"
	keyUsageTable      = "apikey_usage"
	accountTable       = "account"
	sessionTable       = "session"
	outboxTable        = "outbox"
	outboxPendingTable = "outbox_pending"
	outboxReceiptTable = "outbox_receipt"
	outboxStatusTable  = "outbox_status"
	idemTable          = "idem"
	protectTable       = "protect"
	contactBookTable   = "contact_book"
	recipientMarkTable = "recipient_mark"
	campaignTable      = "campaign"
	campaignDetails    = "campaign_detail"
	messageLogTable    = "msg_log"
	inboundIDTable     = "msg_in"
	messageNotesTable  = "msg_note"
	netSendTable       = "net_send"
	netIDTable         = "net_id"
	cloudTemplateTable = "cloud_template"
	routingTable       = "routing"
	cloudWindowTable   = "cloud_window"
	recordVersion1     = 1

	// keyLockStripes: key writes are serialised per key id over this many locks (store.go).
	keyLockStripes = 64
)

// WriteOnceTables are the tables every message's send writes (its accept's log record, its
// outcome, its receipts) and that the partition's owner seldom reads back (a status query, a
// receipt after the engine forgot the message): a store's cache of what it wrote keeps none of
// them (natskv.Options.Uncached).
func WriteOnceTables() []string {
	return []string{messageLogTable, outboxStatusTable, outboxReceiptTable, outboxPageTable}
}
