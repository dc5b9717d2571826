package whatsapp

// The device store: whatsmeow's sqlstore plus the gateway's own tables, on SQLite (one file in
// the data directory, the single-node default) or PostgreSQL (`--whatsapp-store postgres://`,
// for many sessions and for a cluster, DESIGN.md section 13).
//
// SQLite has one writer, and whatsmeow holds the write lock for each decryption
// (sqlstore.DoDecryptionTxn): with hundreds of sessions an offline-sync burst queues behind it
// (README, "WhatsApp device store", has the load test's figures). PostgreSQL takes row locks.
//
// The PostgreSQL driver is lib/pq: it is what mautrix-whatsapp ships with this whatsmeow pin,
// and its pq.Array is the PostgresArrayWrapper whatsmeow wants for its `= ANY($1)` queries
// (without one whatsmeow falls back to a query per item). pgx's database/sql driver works too
// but has no such wrapper ready, and the gateway needs nothing else of pgx.
//
// The gateway's own statements are written once, with $n placeholders, which both SQLite
// (modernc) and PostgreSQL read; times are BIGINT Unix milliseconds.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/lib/pq"
	"go.mau.fi/whatsmeow/store/sqlstore"
	"go.mau.fi/whatsmeow/types"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver used by the device store
)

const (
	dialectSQLite   = "sqlite"
	dialectPostgres = "postgres"

	// postgresMaxConns bounds the pool of a PostgreSQL store (one more connection holds the
	// devices' advisory locks): a server's default max_connections is 100, shared by every
	// gateway node.
	postgresMaxConns = 16
)

func init() {
	// whatsmeow's `= ANY($1)` queries need arrays wrapped for the driver.
	sqlstore.PostgresArrayWrapper = func(a any) interface {
		driver.Valuer
		sql.Scanner
	} {
		return pq.Array(a)
	}
}

// storeTarget says where the device store is, for messages.
func storeTarget(o Options) string {
	if o.StoreURL != "" {
		return redactURL(o.StoreURL)
	}
	return o.DBPath
}

// redactURL hides a URL's password.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// IsPostgresURL tells whether a `--whatsapp-store` value names PostgreSQL.
func IsPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// openDB opens the store's database: PostgreSQL when o.StoreURL is set, else SQLite at o.DBPath.
func openDB(o Options) (*sql.DB, string, error) {
	if o.StoreURL != "" {
		if !IsPostgresURL(o.StoreURL) {
			return nil, "", fmt.Errorf("whatsapp: store %q: want postgres://… (or no store URL for SQLite in the data directory)", redactURL(o.StoreURL))
		}
		db, err := sql.Open("postgres", o.StoreURL)
		if err != nil {
			return nil, "", fmt.Errorf("whatsapp: open %s: %w", redactURL(o.StoreURL), err)
		}
		db.SetMaxOpenConns(postgresMaxConns)
		db.SetMaxIdleConns(postgresMaxConns)
		db.SetConnMaxIdleTime(5 * time.Minute)
		return db, dialectPostgres, nil
	}
	dsn, err := sqliteDSN(o.DBPath)
	if err != nil {
		return nil, "", err
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, "", fmt.Errorf("whatsapp: open %s: %w", o.DBPath, err)
	}
	return db, dialectSQLite, nil
}

// sqliteDSN builds the modernc.org/sqlite DSN of the device store: foreign keys on (sqlstore
// refuses SQLite without them), WAL so readers do not block the writer, a busy timeout, and
// IMMEDIATE transactions so two writers never deadlock upgrading a read lock.
func sqliteDSN(path string) (string, error) {
	if path == "" {
		return "", errors.New("whatsapp: empty database path")
	}
	if strings.ContainsRune(path, '?') {
		return "", fmt.Errorf("whatsapp: database path %q must not contain '?'", path)
	}
	q := url.Values{}
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Set("_txlock", "immediate")
	return path + "?" + q.Encode(), nil
}

// The session table deliberately has no foreign key to whatsmeow_device: a whatsmeow schema
// upgrade that rebuilds that table would cascade-delete every mapping. Stale rows are dropped
// when found (see loadDevice).
const createSessionDeviceTable = `
CREATE TABLE IF NOT EXISTS gateway_session_device (
	session_id TEXT PRIMARY KEY,
	device_jid TEXT NOT NULL UNIQUE,
	paired_at  BIGINT NOT NULL
)`

// Columns added to gateway_session_device after its first release.
var sessionDeviceColumns = []struct{ name, decl string }{
	{"phone_seen_at", "BIGINT NOT NULL DEFAULT 0"},   // phone.go
	{"timelock_until", "BIGINT NOT NULL DEFAULT 0"},  // timelock.go: 0 none, -1 no end given
	{"phone_pinged_at", "BIGINT NOT NULL DEFAULT 0"}, // phone.go
}

// migrate creates the gateway's tables and adds the columns of later releases.
func migrate(ctx context.Context, db *sql.DB, dialect string) error {
	for _, table := range []string{createSessionDeviceTable, createVersionTable} {
		if _, err := db.ExecContext(ctx, table); err != nil {
			return fmt.Errorf("create gateway tables: %w", err)
		}
	}
	for _, col := range sessionDeviceColumns {
		if err := addColumn(ctx, db, dialect, "gateway_session_device", col.name, col.decl); err != nil {
			return fmt.Errorf("upgrade session table: %w", err)
		}
	}
	return nil
}

// addColumn adds a column unless the table has it (SQLite has no ADD COLUMN IF NOT EXISTS).
func addColumn(ctx context.Context, db *sql.DB, dialect, table, column, decl string) error {
	if dialect == dialectPostgres {
		_, err := db.ExecContext(ctx, fmt.Sprintf(`ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s %s`, table, column, decl))
		return err
	}
	rows, err := db.QueryContext(ctx, fmt.Sprintf(`SELECT name FROM pragma_table_info('%s')`, table))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return err
		}
		if name == column {
			return nil
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, fmt.Sprintf(`ALTER TABLE %s ADD COLUMN %s %s`, table, column, decl))
	return err
}

func lookupSessionDevice(ctx context.Context, db *sql.DB, sessionID string) (types.JID, bool, error) {
	var raw string
	err := db.QueryRowContext(ctx,
		`SELECT device_jid FROM gateway_session_device WHERE session_id = $1`, sessionID).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return types.JID{}, false, nil
	}
	if err != nil {
		return types.JID{}, false, fmt.Errorf("read session device: %w", err)
	}
	jid, err := types.ParseJID(raw)
	if err != nil {
		return types.JID{}, false, fmt.Errorf("parse session device %q: %w", raw, err)
	}
	return jid, true, nil
}

// saveSessionDevice records the device a session was linked to. A device belongs to one
// session: a stale row of another session naming it is replaced. A new link starts with no
// timelock notice (the notice belongs to the phone's account).
func saveSessionDevice(ctx context.Context, db *sql.DB, sessionID string, jid types.JID, at time.Time) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("save session device: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx,
		`DELETE FROM gateway_session_device WHERE device_jid = $1 AND session_id <> $2`,
		jid.String(), sessionID); err != nil {
		return fmt.Errorf("save session device: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO gateway_session_device (session_id, device_jid, paired_at, phone_seen_at, timelock_until, phone_pinged_at)
		VALUES ($1, $2, $3, $4, 0, 0)
		ON CONFLICT (session_id) DO UPDATE SET device_jid = excluded.device_jid, paired_at = excluded.paired_at,
			phone_seen_at = excluded.phone_seen_at, timelock_until = 0, phone_pinged_at = 0`,
		sessionID, jid.String(), at.UnixMilli(), at.UnixMilli()); err != nil {
		return fmt.Errorf("save session device: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("save session device: %w", err)
	}
	return nil
}

// forgetSessionDevice removes the session's row if it still names jid (a newer pairing is kept).
func forgetSessionDevice(ctx context.Context, db *sql.DB, sessionID string, jid types.JID) error {
	if _, err := db.ExecContext(ctx,
		`DELETE FROM gateway_session_device WHERE session_id = $1 AND device_jid = $2`,
		sessionID, jid.String()); err != nil {
		return fmt.Errorf("forget session device: %w", err)
	}
	return nil
}
