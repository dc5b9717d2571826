package ecom

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
	if e.cause != nil {
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
