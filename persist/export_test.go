package persist

// WithFreeSpace returns o with the free-space probe replaced (for tests outside the package
// that make the disk look full).
func WithFreeSpace(o BadgerOptions, free func(dir string) (uint64, error)) BadgerOptions {
	o.freeSpace = free
	return o
}
