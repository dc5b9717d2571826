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
//	outbox/<msgID>                 body (2): the message as  14 days   accept (outbox.go); version 1,
//	                               accepted, text included             the whole entry, read as well
//	outbox_pending/<msgID>         pending mark (2): the     -         accept; removed by the outcome
//	                               body's expiry (8 bytes)             (version 1: the whole entry,
//	                                                                   moved by Outbox.Pending)
//	outbox_status/<msgID>          outcome (1)               7 days    the deliverer's outcome (no body)
//	outbox_receipt/<msgID>/<st>    domain.StatusChange (1)   7 days    receipts: delivered, read
//	idem/<keyID>/<Idempotency-Key> IdemRecord (1)            24 h      accept (same commit as the entry)
//	protect/<sid>/<phone>          domain.Protections (1)    -         session actor (DESIGN.md section 14)
//	contact_book/<sid>/<phone>/<n> domain.Contact (1)        -         session actor (first messages, replies)
//	recipient_mark/<sid>/<phone>/<n> domain.RecipientMark (1) until its end  session actor (463 twice)
//	contact/<sessionID>/<phone>    retired (the book was per session, not per linked phone; never read)
//	campaign/<id>                  domain.Campaign (1)       30 days   campaign actor (TTL once ended)
//	campaign_detail/<id>/<index>   domain.CampaignDetail (1) 90 days   campaign actor
//	msg_log/<uid>/<ms>/<dir>/<id>  LogEntry (1)              7 days    accept (out, with the entry);
//	                               the history index         saving an incoming message (in)
//	                               (messages.go: uid path-escaped, ms 13 digits, dir out|in)
//	msg_in/<uid>/<id>              the msg_log key after     7 days    saving an incoming message (its
//	                               the user's prefix (raw)             id → its entry: replies, reads)
//	msg_note/<uid>/<id>            domain.MessageNotes (1)   7 days    engine: reactions, edit, revoke,
//	                                                                   poll votes (notes.go)
//	net_send/, net_id/, cloud_template/, routing/, cloud_window/: the Cloud API's (cloud.go)
//	inbox/, webhook_seen/, store_sent/, store_event/, store/, nonces, templates: see inbox.go
//	and stores.go (the store integration's tables); store_order/, store_answer/,
//	store_writeback/, store_checkout/, optout/: see storeloop.go (the store loop).
//	outbox/<msgID>'s body carries sendAt (a message sent later: scheduled until then).
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
