package scenario

import "fmt"

// Programs of a host's users that try to blind the probe. Each is a python3 program that
// prints "ready PID" once in place and then sleeps (testenv.StartReady starts them).

// HugeArgv is a program whose command line, as /proc/PID/cmdline shows it, is one line of size
// bytes: it points its argument area at a mapping of its own filled with "A" and ending in one
// NUL, with prctl PR_SET_MM_MAP, which needs no privilege (fix/testdata/slowargv.py does the
// same with untouched memory). The probe describes it when it uses a GPU (a fake nvidia-smi
// lists it).
func HugeArgv(size int) string {
	return fmt.Sprintf(`import ctypes, os, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
size = %d
addr = libc.mmap(None, size, 3, 0x22, -1, 0)  # PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS
if addr in (None, ctypes.c_void_p(-1).value):
    sys.exit("mmap: errno %%d" %% ctypes.get_errno())
ctypes.memset(addr, ord("A"), size - 1)
ctypes.memset(addr + size - 1, 0, 1)
stat = open("/proc/self/stat").read()
f = stat[stat.rindex(")") + 2:].split()
field = lambda n: int(f[n - 3])  # field n of stat, counted from 1
brk = libc.syscall(12, ctypes.c_ulong(0))
# struct prctl_mm_map: code, data, brk, stack, argv and environment bounds, no auxv, exe_fd -1.
mm = struct.pack("QQQQQQQQQQQQII", field(26), field(27), field(45), field(46), field(47), brk, field(28),
                 addr, addr + size, field(50), field(51), 0, 0, 0xFFFFFFFF)
buf = ctypes.create_string_buffer(mm, len(mm))
if libc.prctl(35, 14, ctypes.addressof(buf), len(mm), 0) != 0:  # PR_SET_MM, PR_SET_MM_MAP
    sys.exit("prctl PR_SET_MM_MAP: errno %%d" %% ctypes.get_errno())
print("ready", os.getpid(), flush=True)
time.sleep(100000)`, size)
}

// FDFlood is a program that opens n files below dir, in a directory nested so deep that each
// fd's link target is about 3.5 KiB long: 1,200 of them fill 4 MiB of the probe's fds section.
func FDFlood(dir string, n int) string {
	return fmt.Sprintf(`import os, resource, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
d = %q
os.makedirs(d, exist_ok=True)
os.chdir(d)
for i in range(13):
    name = ("%%02d" %% i) * 125
    os.makedirs(name, exist_ok=True)
    os.chdir(name)
fds = [os.open("f%%05d" %% i, os.O_CREAT | os.O_RDWR, 0o600) for i in range(%d)]
print("ready", os.getpid(), flush=True)
time.sleep(100000)`, dir, n)
}

// HoldDeleted is a program that writes a weights file of size bytes under dir, keeps it open
// (no mapping) and deletes it, keeping dir, its own (0755): deleted-but-open weights only its
// owner or root could have deleted.
func HoldDeleted(dir string, size int64) string {
	return fmt.Sprintf(`import os, time
os.makedirs(%q, exist_ok=True)
os.chmod(%q, 0o755)
path = os.path.join(%q, "model-00001-of-00001.safetensors")
fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
os.ftruncate(fd, %d)
os.unlink(path)
print("ready", os.getpid(), flush=True)
time.sleep(100000)`, dir, dir, dir, size)
}
