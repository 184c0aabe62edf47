package badger_test

import (
	"testing"

	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/store/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend { return newStore(t) })
}
