package s3test

import "syscall"

// sysProcAttr ends the gateway with the test binary, even one killed by a
// timeout, so no server outlives its test.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
