# A process whose command line takes hours to read, as any user can make one: it prints
# "PID TICKS UID SHA256" (its identity while its command line is still its own), and once it
# reads a line on standard input points its argv (prctl PR_SET_MM_MAP, which needs no
# privilege) at a terabyte of untouched anonymous memory, prints "slow", and waits for the end
# of standard input. A reader of /proc/PID/cmdline then copies zero pages for hours.
import ctypes
import hashlib
import os
import struct
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]

stat = open("/proc/self/stat").read()
f = stat[stat.rindex(")") + 2:].split()
field = lambda n: int(f[n - 3])  # field n of stat, counted from 1
argv = open("/proc/self/cmdline", "rb").read()
print(os.getpid(), field(22), os.getuid(), hashlib.sha256(argv).hexdigest(), flush=True)
sys.stdin.readline()

size = 1 << 40
PROT_READ, MAP_PRIVATE, MAP_ANONYMOUS, MAP_NORESERVE = 1, 2, 0x20, 0x4000
addr = libc.mmap(None, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
if addr in (None, ctypes.c_void_p(-1).value):
    sys.exit("mmap: errno %d" % ctypes.get_errno())
brk = libc.syscall(12, ctypes.c_ulong(0))
# struct prctl_mm_map: code, data, brk, stack, argv and environment bounds, no auxv, exe_fd -1.
mm = struct.pack("QQQQQQQQQQQQII", field(26), field(27), field(45), field(46), field(47), brk, field(28),
                 addr, addr + size, field(50), field(51), 0, 0, 0xFFFFFFFF)
buf = ctypes.create_string_buffer(mm, len(mm))
PR_SET_MM, PR_SET_MM_MAP = 35, 14
if libc.prctl(PR_SET_MM, PR_SET_MM_MAP, ctypes.addressof(buf), len(mm), 0) != 0:
    sys.exit("prctl PR_SET_MM_MAP: errno %d" % ctypes.get_errno())
print("slow", flush=True)
sys.stdin.read()
