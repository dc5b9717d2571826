package whatsapp

// A device is used by one process at a time (DESIGN.md section 13.1): two gateways connected
// as one device would replace each other's stream, and two writers of one device's Signal
// sessions corrupt them. On PostgreSQL every device in use is held under a session-level
// advisory lock, all on one dedicated connection of this process: a process that dies, or
// loses that connection, lets its devices go at once (the server drops a dead connection's
// locks), and another node takes them over. A client takes its device's lock before it
// connects and lets it go when it disconnects, logs out or shuts down. SQLite needs none:
// its file belongs to one process.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/types"

	"github.com/gateway/gateway/network"
)

// lockCheckEvery: how often the lock connection is checked; a lost one is noticed within this.
const lockCheckEvery = 5 * time.Second

// deviceLocks holds the advisory locks of this process's devices.
type deviceLocks struct {
	db   *sql.DB
	log  *slog.Logger
	lost func(jids []types.JID) // called (on its own goroutine) when the lock connection died

	mu   sync.Mutex // serialises the lock connection's use
	conn *sql.Conn
	held map[types.JID]bool
	stop chan struct{}
	done chan struct{}
}

func newDeviceLocks(db *sql.DB, log *slog.Logger, lost func([]types.JID)) *deviceLocks {
	l := &deviceLocks{db: db, log: log, lost: lost, held: make(map[types.JID]bool),
		stop: make(chan struct{}), done: make(chan struct{})}
	go l.watch()
	return l
}

// lockKey is the advisory lock key of a device: 64 bits of FNV-1a of its JID, in a namespace
// of its own so other users of the database do not collide with it.
func lockKey(jid types.JID) int64 {
	h := fnv.New64a()
	h.Write([]byte("gateway whatsmeow device " + jid.String()))
	return int64(h.Sum64())
}

// acquire takes jid's lock; false (and no error) when another process holds it.
func (l *deviceLocks) acquire(ctx context.Context, jid types.JID) (bool, error) {
	if l == nil {
		return true, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[jid] {
		return true, nil
	}
	if l.conn == nil {
		conn, err := l.db.Conn(ctx)
		if err != nil {
			return false, fmt.Errorf("device lock connection: %w", err)
		}
		l.conn = conn
	}
	var ok bool
	if err := l.conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, lockKey(jid)).Scan(&ok); err != nil {
		l.dropConn()
		return false, fmt.Errorf("device lock: %w", err)
	}
	if ok {
		l.held[jid] = true
	}
	return ok, nil
}

// release lets jid's lock go (a no-op when not held).
func (l *deviceLocks) release(jid types.JID) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held[jid] || l.conn == nil {
		return
	}
	delete(l.held, jid)
	ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
	defer cancel()
	if _, err := l.conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, lockKey(jid)); err != nil {
		// The connection is in doubt: closing it lets every lock it held go, so the others
		// must be taken again.
		l.log.Warn("could not release a device lock; dropping the lock connection", "device", jid.String(), "error", err)
		l.lostLocked()
	}
}

// holds tells whether this process holds jid's lock.
func (l *deviceLocks) holds(jid types.JID) bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[jid]
}

// dropConn closes the lock connection (its locks go with it). Called with mu held.
func (l *deviceLocks) dropConn() {
	if l.conn != nil {
		// Returned to the pool, the connection would keep its locks: discard it.
		_ = l.conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = l.conn.Close()
		l.conn = nil
	}
}

// lostLocked drops the connection and reports the devices whose locks went with it. Called
// with mu held.
func (l *deviceLocks) lostLocked() {
	l.dropConn()
	var jids []types.JID
	for jid := range l.held {
		jids = append(jids, jid)
	}
	clear(l.held)
	if len(jids) > 0 && l.lost != nil {
		go l.lost(jids)
	}
}

// watch checks the lock connection; a dead one means the locks are gone.
func (l *deviceLocks) watch() {
	defer close(l.done)
	t := time.NewTicker(lockCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		l.mu.Lock()
		if l.conn != nil {
			ctx, cancel := context.WithTimeout(context.Background(), lockCheckEvery)
			err := l.conn.PingContext(ctx)
			cancel()
			if err != nil {
				l.log.Error("lost the connection holding the device locks; the devices reconnect once their locks are taken again",
					"devices", len(l.held), "error", err)
				l.lostLocked()
			}
		}
		l.mu.Unlock()
	}
}

// close releases every lock (by closing the connection).
func (l *deviceLocks) close() {
	if l == nil {
		return
	}
	close(l.stop)
	<-l.done
	l.mu.Lock()
	l.dropConn()
	clear(l.held)
	l.mu.Unlock()
}

// lockDevice takes the lock of wa's device before a connection attempt (nothing to take for a
// device not linked yet: no other process knows it).
func (c *client) lockDevice(wa *whatsmeow.Client) error {
	jid := wa.Store.ID
	if jid == nil || c.n.locks == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.n.ctx, dbTimeout)
	defer cancel()
	ok, err := c.n.locks.acquire(ctx, *jid)
	switch {
	case err != nil:
		return err
	case !ok:
		return errDeviceInUse
	}
	return nil
}

// errDeviceInUse: another process holds the device's lock (a node still handing it over, or
// a second gateway on the same store); the connect loop waits for it.
var errDeviceInUse = errors.New("the device is in use by another gateway process (its PostgreSQL advisory lock is held)")

// locksLost reconnects the clients whose device locks went with a dead lock connection: each
// disconnects at once (another node may take the device over) and connects again once it has
// its lock back.
func (n *Network) locksLost(jids []types.JID) {
	lost := make(map[types.JID]bool, len(jids))
	for _, j := range jids {
		lost[j] = true
	}
	n.mu.Lock()
	var clients []*client
	for _, c := range n.clients {
		c.mu.Lock()
		if lost[c.device] {
			clients = append(clients, c)
		}
		c.mu.Unlock()
	}
	n.mu.Unlock()
	for _, c := range clients {
		go c.relock()
	}
}

// relock restarts the connection of a client whose device lock was lost.
func (c *client) relock() {
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	c.stopLoop()
	c.mu.Lock()
	if c.closed || c.stayDown || !c.waUsed || c.phone == "" {
		c.mu.Unlock()
		return
	}
	wa, gen := c.wa, c.gen
	c.setOnline(false)
	loop := &connectLoop{stop: make(chan struct{}), done: make(chan struct{})}
	c.loop = loop
	c.mu.Unlock()
	wa.Disconnect()
	c.pushLocal(gen, network.Disconnected{
		Reason:       "lost the device lock (database connection); reconnecting once it is taken again",
		Reconnecting: true,
		StatusReason: network.ReasonNetwork,
	})
	go c.runConnect(loop, wa, gen)
}
