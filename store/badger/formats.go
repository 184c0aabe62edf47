package badger

// formatsOf is the Badger release whose file formats the durability layer
// reads behind Badger's back: the WAL's entries and file sizes
// (walcheck.go, walsync.go), the tables' footers and blocks (guard.go,
// tablesums.go), the value log's files (reclaim.go). Badger keeps none of
// them as an API, so a new release may change any of them without a word
// and these checks would then pass damage or refuse a sound store.
// TestFormatsPinned fails once go.mod names another release: read its
// changes to those files, then update this.
const formatsOf = "v4.9.6"
