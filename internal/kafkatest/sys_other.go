//go:build !linux

package kafkatest

import (
	"os"
	"syscall"
	"time"
)

func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// lockFile creates path exclusively, waiting while another process holds it.
func lockFile(path string) (func(), error) {
	for {
		f, err := os.OpenFile(path+".held", os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			f.Close()
			return func() { os.Remove(path + ".held") }, nil
		}
		if !os.IsExist(err) {
			return nil, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
