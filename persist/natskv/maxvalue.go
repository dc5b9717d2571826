package natskv

// MaxValue is the largest value a commit of the view may write (Store.MaxValue): the outbox
// bounds its outcome pages by it.
func (v *View) MaxValue() int { return v.s.maxValue }
