//go:build !unix

package cli

// openNoFollow is no flag here: the log is checked after it is opened.
const openNoFollow = 0
