//go:build !unix

package cli

// openNoFollow: no such flag here; the log is checked after it is opened.
const openNoFollow = 0
