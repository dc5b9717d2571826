package natskv

// Abandon stops the store as a killed process would: the lease is not released and the
// connection just closes.
func (s *Store) Abandon() {
	s.lease = nil
	s.Close()
}
