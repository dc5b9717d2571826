package ecom

import (
	"errors"
	"net"
)

// detailError carries one of the package's sentinel errors (matched with errors.Is) plus
// detail for logs, and optionally the cause (a network or context error).
type detailError struct {
	kind   error
	detail string
	cause  error
}

func (e *detailError) Error() string {
	s := e.kind.Error()
	if e.detail != "" {
		s += ": " + e.detail
	}
	var dns *net.DNSError
	switch {
	case errors.As(e.cause, &dns):
		// Without the resolver's address, which DNSError's text names: the answer goes to a
		// client, and the gateway's network is none of its business.
		s += ": lookup " + dns.Name + ": " + dns.Err
	case e.cause != nil:
		s += ": " + e.cause.Error()
	}
	return s
}

func (e *detailError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.kind, e.cause}
	}
	return []error{e.kind}
}
