package wire

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// NewArena creates the shared arena: a memfd of size bytes (sparse: pages are
// allocated when first touched) mapped MAP_SHARED. The file goes to the child
// as ExtraFiles[0]; mem is the host's mapping.
func NewArena(size int64) (f *os.File, mem []byte, err error) {
	fd, err := unix.MemfdCreate("libquant-rpc-arena", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, nil, fmt.Errorf("memfd_create: %w", err)
	}
	f = os.NewFile(uintptr(fd), "libquant-rpc-arena")
	if err := f.Truncate(size); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("sizing the arena to %d bytes: %w", size, err)
	}
	mem, err = Map(fd, size)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, mem, nil
}

// Map maps size bytes of the arena file fd, shared and writable.
func Map(fd int, size int64) ([]byte, error) {
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping the %d-byte arena: %w", size, err)
	}
	return mem, nil
}

// Unmap releases a mapping made by Map or NewArena.
func Unmap(mem []byte) error { return unix.Munmap(mem) }
