package natskv

import (
	"context"
	"errors"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// pageMsg is one message of a scan's page.
type pageMsg struct {
	subject string
	seq     uint64
	header  nats.Header
	data    []byte
}

// scanPage reads one page of a scan with a direct batch get (any replica answers: R1 has one).
// pending is what the server counted after the page's last message.
func (s *Store) scanPage(ctx context.Context, seq uint64, filter string) (msgs []pageMsg, pending uint64, err error) {
	err = whileUnrouted(ctx, func() error {
		msgs, pending = msgs[:0], 0
		it, err := jetstreamext.GetBatch(ctx, s.js, s.name, scanPage, jetstreamext.GetBatchSeq(seq), jetstreamext.GetBatchSubject(filter))
		if err != nil {
			return err
		}
		for msg, err := range it {
			if errors.Is(err, jetstreamext.ErrNoMessages) {
				break
			}
			if err != nil {
				return err
			}
			pending, _ = strconv.ParseUint(msg.Header.Get("Nats-Num-Pending"), 10, 64)
			msgs = append(msgs, pageMsg{subject: msg.Subject, seq: msg.Sequence, header: msg.Header, data: msg.Data})
		}
		return nil
	})
	return msgs, pending, err
}

// leaderNewest is the sequence of the newest message under filter as the stream leader has it
// (0: none).
func (s *Store) leaderNewest(filter string) (uint64, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	msg, err := s.leaderLastRouted(ctx, filter)
	if msg == nil {
		return 0, err
	}
	return msg.Sequence, nil
}

// leaderLastRouted is leaderLast, asked again while unrouted; nil (and no error) when no
// message is under subject.
func (s *Store) leaderLastRouted(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	var msg *jetstream.RawStreamMsg
	err := whileUnrouted(ctx, func() (err error) {
		msg, err = s.leaderLast(ctx, subject)
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	return msg, err
}
