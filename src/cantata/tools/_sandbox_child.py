"""The program `LocalCodeExecutor` starts for each snippet: it builds the kernel's confinement
around itself, then runs the snippet in the confined process.

Run by the interpreter the snippet is for (``python -I -c`` importing this file, so that its
compiled form is cached, then `main`), so it uses the standard library only (that
interpreter need not have cantata installed). Three processes:

- the first (the one the executor started and kills at the time limit) enters new user,
  mount, network, PID, IPC, UTS and cgroup namespaces, mounts the new root (an empty
  read-only tmpfs holding read-only binds of the interpreter's library directories and the
  system libraries, four device files, and the scratch directory, the only writable place),
  drops every capability, and waits for the second;
- the second is PID 1 of the new PID namespace: when it ends, the kernel kills whatever is
  left in the namespace. It waits for the third and reports how that ended;
- the third sets the resource limits, forbids new privileges, installs a seccomp filter
  (no ``execve``, no new process, only threads; no mount, ptrace, namespace or kernel-keyring
  calls; no setuid or setgid file), tells the executor that the sandbox is up, and runs the snippet.

Any step that fails is reported on the report pipe (``report_fd=``) as one line,
``missing: <what>``, and the process exits with status 125 before the snippet runs; the
executor turns that into `SandboxUnavailableError`. Nothing is tried in a weaker way instead.
"""

from __future__ import annotations

# the C module behind `signal`, without the enums whose import every run would pay for
import _signal as signal  # type: ignore[import-not-found]
import ctypes
import errno
import os
import resource
import struct
import sys
import types

# -- constants of the Linux ABI (x86_64) ------------------------------------------------

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_THREAD = 0x00010000

MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_NOSUID = 2
MS_NODEV = 4
MNT_DETACH = 2

MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
MOUNT_ATTR_NOEXEC = 0x8

PR_SET_PDEATHSIG = 1
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

AUDIT_ARCH_X86_64 = 0xC000003E
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000

# x86_64 system call numbers
NR = {
    "clone": 56,
    "fork": 57,
    "vfork": 58,
    "execve": 59,
    "ptrace": 101,
    "syslog": 103,
    "personality": 135,
    "uselib": 134,
    "vhangup": 153,
    "pivot_root": 155,
    "chroot": 161,
    "acct": 163,
    "settimeofday": 164,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "iopl": 172,
    "ioperm": 173,
    "init_module": 175,
    "delete_module": 176,
    "quotactl": 179,
    "clock_settime": 227,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "perf_event_open": 298,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "execveat": 322,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "clone3": 435,
    "mount_setattr": 442,
}
MODE_CALLS: tuple[tuple[str, int, int], ...] = (
    ("open", 2, 2),
    ("creat", 85, 1),
    ("chmod", 90, 1),
    ("fchmod", 91, 1),
    ("mknod", 133, 1),
    ("openat", 257, 3),
    ("mknodat", 259, 2),
    ("fchmodat", 268, 2),
    ("fchmodat2", 452, 2),
)
"""Calls that set a file's mode, with the index of their mode argument: a setuid or setgid
bit is refused (EPERM). The code runs as the caller's user; when that is root, such a file
left in the scratch directory would be a setuid-root program for the host."""
_NR_OPENAT2 = 437  # its mode is in a struct the filter cannot read: ENOSYS, the C library
# falls back to openat
_NR_UNSHARE = 272
_NR_PIVOT_ROOT = 155
_NR_MOUNT_SETATTR = 442
_NR_CAPSET = 126

DENIED = tuple(n for n in NR if n not in ("clone", "clone3"))
"""Calls refused with EPERM: starting programs and processes, and every call that changes
mounts, namespaces, privileges, the kernel or another process."""

SYSTEM_LIBRARIES = ("/lib", "/lib64", "/usr/lib", "/usr/lib64")
DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")

EXIT_SETUP = 125
"""The exit status of a sandbox that could not be built (the reason is on the report pipe)."""


class SetupError(Exception):
    """A part of the confinement could not be put in place; the message says which."""


_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> int:
    if result == -1:
        code = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(code)} (errno {errno.errorcode.get(code, code)})")
    return result


def _syscall(number: int, *args: object) -> int:
    return int(_libc.syscall(ctypes.c_long(number), *args))


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str) -> None:
    _check(
        _libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {source or ''} on {target}",
    )


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def _set_attributes(path: str, attributes: int) -> None:
    """Add mount attributes (read-only, nosuid, ...) to the mount at `path`, keeping those
    it has (a remount would have to repeat the flags the kernel locked)."""
    attr = _MountAttr(attributes, 0, 0, 0)
    _check(
        _syscall(
            _NR_MOUNT_SETATTR,
            ctypes.c_int(-100),
            path.encode(),
            ctypes.c_uint(0),
            ctypes.byref(attr),
            ctypes.c_size_t(ctypes.sizeof(attr)),
        ),
        f"mount_setattr on {path} (Linux 5.12 or later)",
    )


def _prctl(option: int, arg: int, what: str) -> None:
    _check(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), 0, 0), what)


# -- seccomp ------------------------------------------------------------------------------


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K


def seccomp_program(denied: tuple[str, ...] = DENIED, *, threads_only: bool = True) -> bytes:
    """The filter, as classic BPF: other architectures and the x32 ABI kill the process;
    `denied` calls fail with EPERM, and so does a setuid or setgid mode (`MODE_CALLS`);
    with `threads_only`, ``clone`` only makes threads (``CLONE_THREAD`` set), and
    ``clone3`` (whose flags a filter cannot read) fails with ENOSYS, so that the C library
    falls back to ``clone``."""
    eperm = SECCOMP_RET_ERRNO | errno.EPERM
    prog = [
        _insn(_LD_ABS, 0, 0, 4),  # arch
        _insn(_JEQ, 1, 0, AUDIT_ARCH_X86_64),
        _insn(_RET, 0, 0, SECCOMP_RET_KILL_PROCESS),
        _insn(_LD_ABS, 0, 0, 0),  # syscall number
        _insn(_JGE, 0, 1, 0x40000000),  # x32
        _insn(_RET, 0, 0, SECCOMP_RET_KILL_PROCESS),
    ]
    for name in denied:
        prog += [_insn(_JEQ, 0, 1, NR[name]), _insn(_RET, 0, 0, eperm)]
    prog += [_insn(_JEQ, 0, 1, _NR_OPENAT2), _insn(_RET, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS)]
    for _, number, index in MODE_CALLS:
        prog += [
            _insn(_JEQ, 0, 4, number),
            _insn(_LD_ABS, 0, 0, 16 + 8 * index),  # the mode, low 32 bits
            _insn(_JSET, 0, 1, 0o6000),  # S_ISUID | S_ISGID
            _insn(_RET, 0, 0, eperm),
            _insn(_RET, 0, 0, SECCOMP_RET_ALLOW),
        ]
    if not threads_only:
        return b"".join([*prog, _insn(_RET, 0, 0, SECCOMP_RET_ALLOW)])
    prog += [
        _insn(_JEQ, 0, 1, NR["clone3"]),
        _insn(_RET, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS),
        _insn(_JEQ, 0, 3, NR["clone"]),
        _insn(_LD_ABS, 0, 0, 16),  # args[0], low 32 bits: the flags
        _insn(_JSET, 1, 0, CLONE_THREAD),
        _insn(_RET, 0, 0, eperm),
        _insn(_RET, 0, 0, SECCOMP_RET_ALLOW),
    ]
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_seccomp(denied: tuple[str, ...] = DENIED, *, threads_only: bool = True) -> None:
    """Forbid new privileges and install the filter (`seccomp_program`) on this process and
    on whatever it starts."""
    machine = os.uname().machine
    if machine != "x86_64":
        raise SetupError(
            f"a seccomp filter for {machine} (the sandbox's filter is written for x86_64)"
        )
    program = seccomp_program(denied, threads_only=threads_only)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    _prctl(PR_SET_NO_NEW_PRIVS, 1, "prctl(PR_SET_NO_NEW_PRIVS)")
    _check(
        _libc.prctl(
            ctypes.c_int(PR_SET_SECCOMP),
            ctypes.c_ulong(SECCOMP_MODE_FILTER),
            ctypes.byref(fprog),
            0,
            0,
        ),
        "seccomp (prctl PR_SET_SECCOMP; a kernel built with CONFIG_SECCOMP_FILTER)",
    )


# -- namespaces and the new root --------------------------------------------------------


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def enter_namespaces() -> None:
    """New user namespace (this user is root in it, nobody else is mapped) owning new mount,
    network, PID, IPC, UTS and cgroup namespaces."""
    uid, gid = os.getuid(), os.getgid()
    flags = (
        CLONE_NEWUSER
        | CLONE_NEWNS
        | CLONE_NEWNET
        | CLONE_NEWPID
        | CLONE_NEWIPC
        | CLONE_NEWUTS
        | CLONE_NEWCGROUP
    )
    _check(
        _syscall(_NR_UNSHARE, ctypes.c_int(flags)),
        "unshare of user, mount, network and PID namespaces (user namespaces enabled: "
        "sysctl user.max_user_namespaces > 0, kernel.unprivileged_userns_clone = 1, or root)",
    )
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"0 {uid} 1")
        _write("/proc/self/gid_map", f"0 {gid} 1")
    except OSError as exc:
        raise SetupError(f"the user namespace's id maps (a mounted /proc): {exc}") from exc


def readable_paths() -> list[str]:
    """What the code may read: the interpreter's library directories (its ``sys.path``) and
    the system libraries its extension modules link against."""
    paths: list[str] = []
    for entry in [*sys.path, *SYSTEM_LIBRARIES, "/etc/ld.so.cache"]:
        if not entry.startswith("/") or not os.path.lexists(entry):
            continue
        if os.path.islink(entry) and entry in SYSTEM_LIBRARIES:
            paths.append(entry)  # kept as a link (merged /usr: /lib -> usr/lib)
            continue
        real = os.path.realpath(entry)
        if real == "/" or real in paths:
            continue
        paths.append(real)
    return paths


def _bind(source: str, target: str, attributes: int) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o644))
    _mount(source, target, None, MS_BIND, "")
    _set_attributes(target, attributes)


def build_root(readable: list[str], scratch: str) -> None:
    """Make this mount namespace's root an empty read-only tmpfs holding only `readable`
    (read-only), the device files, and `scratch` (writable; no devices, setuid or exec)."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE, "")
    # bubblewrap's way: a tmpfs on /tmp becomes the root, the old root is kept at /oldroot
    # while the new root is filled from it, then detached.
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
    os.chdir("/tmp")
    os.mkdir("newroot")
    os.mkdir("oldroot")
    _check(_syscall(_NR_PIVOT_ROOT, b".", b"oldroot"), "pivot_root")
    os.chdir("/")
    _mount("tmpfs", "/newroot", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    read_only = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV
    for path in readable:
        source = "/oldroot" + path
        if os.path.islink(source) and path in SYSTEM_LIBRARIES:
            os.symlink(os.readlink(source), "/newroot" + path)
            continue
        _bind(source, "/newroot" + path, read_only)
    for device in DEVICES:
        _bind("/oldroot" + device, "/newroot" + device, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID)
    _bind(
        "/oldroot" + scratch,
        "/newroot" + scratch,
        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
    )
    _set_attributes("/newroot", read_only)
    _check(_libc.umount2(b"/oldroot", ctypes.c_int(MNT_DETACH)), "umount of the old root")
    os.chdir("/newroot")
    _check(_syscall(_NR_PIVOT_ROOT, b".", b"."), "pivot_root into the new root")
    _check(_libc.umount2(b".", ctypes.c_int(MNT_DETACH)), "umount of the build root")
    os.chdir("/")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def drop_capabilities() -> None:
    """No capability left (in the new user namespace), none to regain from the bounding set."""
    for cap in range(64):
        if _libc.prctl(ctypes.c_int(PR_CAPBSET_DROP), ctypes.c_ulong(cap), 0, 0, 0) != 0:
            if ctypes.get_errno() == errno.EINVAL:  # past the last capability
                break
            _check(-1, f"dropping capability {cap} from the bounding set")
    _libc.prctl(ctypes.c_int(PR_CAP_AMBIENT), ctypes.c_ulong(PR_CAP_AMBIENT_CLEAR_ALL), 0, 0, 0)
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_syscall(_NR_CAPSET, ctypes.byref(header), data), "capset (dropping capabilities)")


def set_limits(config: dict[str, str]) -> None:
    """The resource limits of the code's process (soft and hard: it cannot raise them)."""
    cpu = int(config["cpu_seconds"])
    for name, value in (
        ("RLIMIT_AS", int(config["memory_bytes"])),
        ("RLIMIT_CPU", cpu),
        ("RLIMIT_FSIZE", int(config["file_bytes"])),
        ("RLIMIT_NOFILE", int(config["open_files"])),
        ("RLIMIT_NPROC", int(config["processes"])),
        ("RLIMIT_CORE", 0),
        ("RLIMIT_MEMLOCK", 0),
    ):
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
        except (ValueError, OSError) as exc:
            raise SetupError(f"setrlimit {name}={value}: {exc}") from exc


# -- the three processes ------------------------------------------------------------------


def _wait_status(pid: int) -> int:
    """Wait for `pid`, reaping any other child meanwhile; its raw wait status."""
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 0
        except InterruptedError:
            continue
        if done == pid:
            return status


def _end_like(status: int) -> None:
    """End this process the way a child with `status` ended."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def prepare(config: dict[str, str]) -> None:
    """Build the sandbox; returns only in the code's process, confined and limited."""
    report = int(config["report_fd"])
    scratch = str(config["scratch"])
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        readable = readable_paths()
        enter_namespaces()
        build_root(readable, scratch)
        drop_capabilities()
    except (SetupError, OSError) as exc:
        os.write(report, f"missing: {exc}\n".encode())
        os._exit(EXIT_SETUP)
    read_status, write_status = os.pipe()
    init = os.fork()
    if init:  # the first process: wait for PID 1, end as the code ended
        os.close(report)
        os.close(write_status)
        data = b""
        while chunk := os.read(read_status, 16):
            data += chunk
        init_status = _wait_status(init)
        _end_like(int(data) if data.strip() else init_status)
    # PID 1 of the new namespace
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, "prctl(PR_SET_PDEATHSIG)")
    os.close(read_status)
    code = os.fork()
    if code:
        os.close(report)
        status = _wait_status(code)
        os.write(write_status, str(status).encode())
        os._exit(0)
    # the code's process
    os.close(write_status)
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, "prctl(PR_SET_PDEATHSIG)")
        os.chdir(scratch)
        set_limits(config)
        install_seccomp()
    except (SetupError, OSError) as exc:
        os.write(report, f"missing: {exc}\n".encode())
        os._exit(EXIT_SETUP)
    os.write(report, b"ok\n")
    os.close(report)


def run_script(path: str) -> None:
    """Run the snippet at `path` as ``__main__``, its traceback without this program's frame."""
    sys.argv = [path]
    sys.dont_write_bytecode = True
    module = types.ModuleType("__main__")
    module.__file__ = path
    sys.modules["__main__"] = module
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
        exec(compile(source, path, "exec"), module.__dict__)
    except SystemExit:
        raise
    except BaseException as exc:
        tb = exc.__traceback__
        if tb is not None:
            exc = exc.with_traceback(tb.tb_next)
        sys.excepthook(type(exc), exc, exc.__traceback__)
        sys.exit(1)


def main(argv: list[str]) -> None:
    """Confine this process as `argv` (``KEY=VALUE`` arguments; json would cost its import,
    and re's, on every run) says, then run the snippet in it."""
    config = dict(arg.split("=", 1) for arg in argv)
    prepare(config)
    run_script(config["script"])


if __name__ == "__main__":
    main(sys.argv[1:])
