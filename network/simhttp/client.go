package simhttp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/goccy/go-json"
	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// Options configure Dial.
type Options struct {
	// URL is the sim process's address (http://host:port), as `gateway sim --addr` serves it.
	URL string
	// Timeout bounds a call without a context deadline (default 60 s).
	Timeout time.Duration
	Logger  *slog.Logger
	// PollWait is how long one event poll waits on the server (default 25 s; tests shorten it).
	PollWait time.Duration
}

// Network is the sim network of another process, through its Server. It implements
// network.Network; it is safe for concurrent use.
type Network struct {
	base     string
	hc       *fasthttp.Client
	pc       *http.Client // event polls
	sub      string       // this process's subscriber id
	timeout  time.Duration
	pollWait time.Duration
	log      *slog.Logger
	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{}

	mu        sync.Mutex
	clients   map[string]*client
	sinks     map[string]func(network.Event)
	connected map[string]bool   // sessions Connect was called for (reconnected after a sim restart)
	phones    map[string]string // last known pairing, for Paired when the sim does not answer
	instance  string
}

// Interface guards.
var (
	_ network.Network = (*Network)(nil)
	_ network.Client  = (*client)(nil)
)

// Dial returns the network served at o.URL and starts receiving its events. It does no I/O
// before the first call (the sim may start after the gateway).
func Dial(o Options) (*Network, error) {
	u := strings.TrimRight(o.URL, "/")
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return nil, fmt.Errorf("simhttp: --sim-url %q: want http://host:port", o.URL)
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Minute
	}
	if o.PollWait <= 0 {
		o.PollWait = 25 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	n := &Network{
		base: u, sub: hex.EncodeToString(b), timeout: o.Timeout, pollWait: o.PollWait, log: o.Logger,
		hc: &fasthttp.Client{
			Name: "gateway-sim-client", MaxConnsPerHost: 1024, MaxIdleConnDuration: time.Minute,
			ReadTimeout: o.PollWait + 30*time.Second, WriteTimeout: time.Minute,
			DialTimeout: func(addr string, d time.Duration) (net.Conn, error) {
				return fasthttp.DialTimeout(addr, min(d, 5*time.Second))
			},
		},
		pc:   &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, IdleConnTimeout: time.Minute}},
		done: make(chan struct{}), clients: map[string]*client{}, sinks: map[string]func(network.Event){},
		connected: map[string]bool{}, phones: map[string]string{},
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	go n.pollLoop()
	return n, nil
}

// Open returns the session's client (the same one for the same session), its events now
// going to sink. No I/O: the first call of the client takes the session on the sim.
func (n *Network) Open(sessionID string, sink func(network.Event), _ ...network.Option) (network.Client, error) {
	if sessionID == "" {
		return nil, errors.New("simhttp: empty session id")
	}
	if n.ctx.Err() != nil {
		return nil, fmt.Errorf("simhttp: closed: %w", domain.ErrNotConnected)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.clients[sessionID]
	if c == nil {
		c = &client{n: n, session: sessionID}
		n.clients[sessionID] = c
	}
	n.sinks[sessionID] = sink
	return c, nil
}

// Close stops receiving events and takes this process's sessions offline on the sim (the
// pairings are kept); sessions another node took since are not touched.
func (n *Network) Close() error {
	if n.ctx.Err() != nil {
		return nil
	}
	n.cancel()
	<-n.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := n.do(ctx, "close", call{Sub: n.sub})
	n.hc.CloseIdleConnections()
	if err != nil && !isTransport(err) {
		return err
	}
	return nil
}

// pollLoop receives events in order and hands each to its session's sink.
func (n *Network) pollLoop() {
	defer close(n.done)
	var after uint64
	for n.ctx.Err() == nil {
		p, err := n.poll(after)
		if err != nil {
			n.log.Debug("sim events", "err", err)
			select {
			case <-n.ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		n.mu.Lock()
		restarted := (n.instance != "" && p.Instance != n.instance) || p.Reset
		n.instance = p.Instance
		n.mu.Unlock()
		if restarted {
			after = 0
			n.resync()
		}
		for _, we := range p.Events {
			after = we.Seq
			ev, err := decodeEvent(we.Type, we.Data)
			if err != nil {
				n.log.Warn("sim event", "err", err)
				continue
			}
			n.deliver(we.Session, ev)
		}
	}
}

func (n *Network) deliver(session string, ev network.Event) {
	n.mu.Lock()
	switch e := ev.(type) {
	case network.Paired:
		n.phones[session] = e.Phone
	case network.Connected:
		n.phones[session] = e.Phone
	case network.LoggedOut:
		delete(n.phones, session)
	}
	sink := n.sinks[session]
	n.mu.Unlock()
	if sink != nil {
		sink(ev)
	}
}

// resync: the sim restarted or forgot this process, and events were lost. The sessions this
// process connected hear that their link dropped and are connected again (the sim kept
// their pairings), as a real device reconnects after its server restarted.
func (n *Network) resync() {
	n.mu.Lock()
	var sessions []string
	for s := range n.connected {
		sessions = append(sessions, s)
	}
	n.mu.Unlock()
	if len(sessions) == 0 {
		return
	}
	n.log.Warn("the sim network restarted or lost this node's events; reconnecting its sessions", "sessions", len(sessions))
	for _, s := range sessions {
		n.deliver(s, network.Disconnected{Reason: "the simulated network restarted", Reconnecting: true, StatusReason: network.ReasonNetwork})
	}
	go func() {
		for _, s := range sessions {
			ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
			if _, err := n.do(ctx, "connect", call{Sub: n.sub, Session: s}); err != nil {
				n.log.Warn("sim: reconnect", "session", s, "err", err)
			}
			cancel()
		}
	}()
}

// poll asks for the events after a sequence number. It uses net/http, whose requests end
// with their context, so Close does not wait out a long poll.
func (n *Network) poll(after uint64) (poll, error) {
	var p poll
	ctx, cancel := context.WithTimeout(n.ctx, n.pollWait+10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.base+PathPrefix+"events?sub="+n.sub+
		"&after="+strconv.FormatUint(after, 10)+"&wait="+strconv.FormatInt(n.pollWait.Milliseconds(), 10), nil)
	if err != nil {
		return p, err
	}
	resp, err := n.pc.Do(req)
	if err != nil {
		return p, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return p, err
	}
	if resp.StatusCode != http.StatusOK {
		return p, fmt.Errorf("sim events: status %d", resp.StatusCode)
	}
	return p, json.Unmarshal(body, &p)
}

// transportError: the call did not get an answer from the sim. dial: it never left.
type transportError struct {
	err  error
	dial bool
}

func (e *transportError) Error() string {
	return "the simulated network did not answer: " + e.err.Error()
}
func (e *transportError) Unwrap() error { return e.err }

func isTransport(err error) bool {
	var te *transportError
	return errors.As(err, &te)
}

func isDial(err error) bool {
	var te *transportError
	return errors.As(err, &te) && te.dial
}

// do makes a call and decodes its answer or its error.
func (n *Network) do(ctx context.Context, op string, c call) (answer, error) {
	var a answer
	if err := ctx.Err(); err != nil {
		return a, err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(n.timeout)
	}
	body, err := json.Marshal(c)
	if err != nil {
		return a, err
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(n.base + PathPrefix + op)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.Set("X-Timeout-Ms", strconv.FormatInt(max(time.Until(deadline).Milliseconds(), 1), 10))
	req.SetBody(body)
	if err := n.hc.DoDeadline(req, resp, deadline); err != nil {
		var op *net.OpError
		dial := errors.Is(err, fasthttp.ErrDialTimeout) || errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &op) && op.Op == "dial")
		return a, &transportError{err: err, dial: dial}
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		var w wireError
		if json.Unmarshal(resp.Body(), &w) != nil || w.Code == "" {
			return a, fmt.Errorf("simhttp: %s: status %d", op, resp.StatusCode())
		}
		return a, decodeError(w)
	}
	if err := json.Unmarshal(resp.Body(), &a); err != nil {
		return a, fmt.Errorf("simhttp: %s: %w", op, err)
	}
	return a, nil
}

// client is one session's device, through the sim process.
type client struct {
	n       *Network
	session string
}

func (c *client) call(ctx context.Context, op string, cl call) (answer, error) {
	cl.Sub, cl.Session = c.n.sub, c.session
	a, err := c.n.do(ctx, op, cl)
	if isTransport(err) {
		// Nothing the sim did is known: for every call but Send, the link is as good as down.
		err = fmt.Errorf("%w: %w", domain.ErrNotConnected, err)
	}
	return a, err
}

func (c *client) Connect(ctx context.Context) error {
	_, err := c.call(ctx, "connect", call{})
	if err == nil {
		c.n.mu.Lock()
		c.n.connected[c.session] = true
		c.n.mu.Unlock()
	}
	return err
}

func (c *client) PairPhone(ctx context.Context, phone string) (string, error) {
	a, err := c.call(ctx, "pair-phone", call{Phone: phone})
	return a.Code, err
}

func (c *client) Lookup(ctx context.Context, phones []string) ([]domain.NumberCheck, error) {
	a, err := c.call(ctx, "lookup", call{Phones: phones})
	return a.Checks, err
}

func (c *client) MarkRead(ctx context.Context, ref domain.MessageRef) error {
	_, err := c.call(ctx, "mark-read", call{Ref: &ref})
	return err
}

func (c *client) Groups(ctx context.Context) ([]domain.Group, error) {
	a, err := c.call(ctx, "groups", call{})
	if a.Groups == nil {
		a.Groups = []domain.Group{}
	}
	return a.Groups, err
}

func (c *client) CreateGroup(ctx context.Context, name string, participants []string) (domain.Group, error) {
	return answerGroup(c.call(ctx, "create-group", call{Name: name, Phones: participants}))
}

func (c *client) UpdateParticipants(ctx context.Context, group string, add, remove []string) (domain.Group, error) {
	return answerGroup(c.call(ctx, "update-participants", call{Group: group, Add: add, Remove: remove}))
}

func answerGroup(a answer, err error) (domain.Group, error) {
	if err != nil {
		return domain.Group{}, err
	}
	if a.Group == nil {
		return domain.Group{}, errors.New("simhttp: the sim answered no group")
	}
	return *a.Group, nil
}

func (c *client) InviteLink(ctx context.Context, group string) (string, error) {
	a, err := c.call(ctx, "invite-link", call{Group: group})
	return a.Link, err
}

// Send: a call that never left (the sim is down) is ErrNotConnected; one that may have
// reached the sim without an answer is ErrUnknownOutcome (sent again under the same id, the
// sim delivers it once).
func (c *client) Send(ctx context.Context, m domain.Message) (network.Receipt, error) {
	a, err := c.n.do(ctx, "send", call{Sub: c.n.sub, Session: c.session, Message: &m})
	switch {
	case isDial(err):
		return network.Receipt{}, fmt.Errorf("%w: %w", domain.ErrNotConnected, err)
	case isTransport(err):
		return network.Receipt{}, fmt.Errorf("%w: %w", network.ErrUnknownOutcome, err)
	case err != nil:
		return network.Receipt{}, err
	case a.Receipt == nil:
		return network.Receipt{}, fmt.Errorf("simhttp: send answered no receipt: %w", network.ErrUnknownOutcome)
	}
	return *a.Receipt, nil
}

func (c *client) Logout(ctx context.Context) error {
	_, err := c.call(ctx, "logout", call{})
	if err == nil {
		c.n.mu.Lock()
		delete(c.n.connected, c.session)
		delete(c.n.phones, c.session)
		c.n.mu.Unlock()
	}
	return err
}

func (c *client) Disconnect() {
	c.n.mu.Lock()
	delete(c.n.connected, c.session)
	c.n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.call(ctx, "disconnect", call{}); err != nil {
		c.n.log.Debug("sim: disconnect", "session", c.session, "err", err)
	}
}

// Paired asks the sim; when it does not answer, the last pairing this process saw.
func (c *client) Paired() (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a, err := c.call(ctx, "paired", call{})
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	if err != nil {
		p, ok := c.n.phones[c.session]
		return p, ok
	}
	if a.OK {
		c.n.phones[c.session] = a.Phone
	} else {
		delete(c.n.phones, c.session)
	}
	return a.Phone, a.OK
}
