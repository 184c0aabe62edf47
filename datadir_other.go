//go:build !unix

package main

// openNoFollow: no such flag here; the log is checked after it is opened.
const openNoFollow = 0
