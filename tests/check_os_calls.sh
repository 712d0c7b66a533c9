#!/bin/sh
# Every OS call goes through src/platform/ (one implementation per OS there): this check
# lists each line elsewhere in src/ that includes an OS header, calls an OS function or
# names a /proc, /sys or /dev path, as "file:line: [header|call|path] text", and exits 1 if
# there is any.
#
#   sh tests/check_os_calls.sh [source root]     (default: the repository's src/)
#
# What counts:
#   * OS headers: <sys/...>, <unistd.h>, <fcntl.h>, <signal.h>, <csignal>, <pthread.h>,
#     <sched.h>, <spawn.h>, <dlfcn.h>, <malloc.h>, <poll.h>, <termios.h>, <dirent.h>,
#     <linux/...>, <asm/...>, <windows.h> and the Win32 headers, <io.h>, <process.h>, ...
#   * calls of OS functions: the POSIX and Linux ones by name (mmap, pread, sysconf,
#     sigaction, posix_spawn, ...), the generic names (open, close, read, write, stat, kill,
#     raise, signal, system) only when qualified as ::name( or std::name( (an unqualified
#     call needs one of the headers above, which is caught), and Win32 calls.
#   * /proc/..., /sys/... and /dev/... paths in code, messages included (what a message
#     tells the user to look at is the OS's business too).
# Comments (// to the end of the line, /* ... */) are not checked, so they may still explain
# what the OS does.
#
# Nothing is allowed silently. Outside src/ and so not checked: the Vulkan loader (volk.c,
# compiled from the system's libvulkan-volk-dev, dlopens libvulkan) and third-party headers
# (cpp-httplib's sockets). <cpuid.h> and <immintrin.h> are compiler headers (cpuid and
# xgetbv are instructions, not OS calls) and are not listed.
set -u

root=${1:-$(cd "$(dirname "$0")/.." && pwd)/src}
if [ ! -d "$root" ]; then
  echo "check_os_calls: no such folder: $root" >&2
  exit 2
fi

headers='#[[:space:]]*include[[:space:]]*<(sys/[^>]*|unistd\.h|fcntl\.h|signal\.h|csignal|pthread\.h|sched\.h|spawn\.h|dlfcn\.h|malloc\.h|poll\.h|termios\.h|dirent\.h|pwd\.h|grp\.h|syslog\.h|linux/[^>]*|asm/[^>]*|netinet/[^>]*|arpa/[^>]*|netdb\.h|windows\.h|winbase\.h|winternl\.h|processthreadsapi\.h|memoryapi\.h|sysinfoapi\.h|psapi\.h|io\.h|direct\.h|process\.h|conio\.h|shlobj\.h)>'

posix='mmap|mmap64|munmap|madvise|posix_madvise|mlock|mlock2|munlock|mlockall|munlockall|mprotect|msync|mremap|sysconf|getrlimit|setrlimit|prlimit|getrusage|sigaction|sigprocmask|pthread_sigmask|sigtimedwait|sigwaitinfo|sigwait|sigemptyset|sigaddset|sigfillset|posix_fadvise|fadvise64|pread|pread64|pwrite|pwrite64|preadv|fstat|fstat64|lstat|fstatat|lseek|lseek64|ftruncate|fsync|fdatasync|isatty|fileno|dup|dup2|dup3|pipe|pipe2|fork|vfork|execv|execvp|execve|execvpe|execl|execlp|execle|fexecve|waitpid|wait3|wait4|waitid|posix_spawn|posix_spawnp|posix_spawn_file_actions_init|posix_spawnattr_init|readlink|readlinkat|realpath|getpid|getppid|gettid|setsid|setpgid|sched_getaffinity|sched_setaffinity|sched_yield|sched_getcpu|pthread_setaffinity_np|pthread_getaffinity_np|pthread_create|pthread_kill|pthread_self|pthread_setname_np|malloc_trim|mallopt|malloc_usable_size|prctl|syscall|ioctl|fcntl|mkfifo|mkstemp|mkdtemp|get_nprocs|get_nprocs_conf|dlopen|dlsym|dlclose|clock_gettime|nanosleep|usleep|sleep|alarm|setitimer|popen|pclose|tgkill|setenv|unsetenv|putenv'
generic='open|openat|close|read|write|stat|kill|raise|signal|system'
win32='(Virtual|Heap|Global)(Alloc|Free|Lock|Unlock|Query)[A-Za-z]*|CreateFile[AW]?|CreateFileMapping[AW]?|MapViewOfFile[A-Za-z]*|UnmapViewOfFile|ReadFile|WriteFile|CloseHandle|SetConsoleCtrlHandler|GetConsoleMode|SetConsoleMode|SetConsoleOutputCP|CreateProcess[AW]?|TerminateProcess|WaitForSingleObject|WaitForMultipleObjects|GetExitCodeProcess|GetModuleFileName[AW]?|GetSystemInfo|GetLogicalProcessorInformation[A-Za-z]*|GlobalMemoryStatusEx|GetProcessMemoryInfo|SetThreadAffinityMask|SetThreadGroupAffinity|SetProcessAffinityMask|GetProcessAffinityMask|GetSystemTimes|GetProcessTimes|LoadLibrary[A-Za-z]*|GetProcAddress|GetLastError|_isatty|_fileno|_getpid|_spawnv[a-z]*|_execv[a-z]*|_popen'

# Outside a qualified name, a member access or an identifier: the start of a call.
before='(^|[^A-Za-z0-9_.>:])'
calls="${before}(::)?(${posix}|${win32})[[:space:]]*\(|${before}(::|std::)(${generic})[[:space:]]*\("
paths='(^|[^A-Za-z0-9_.-])/(proc|sys|dev)/'

# C/C++ comments removed from each line: a small scanner that knows string and character
# literals (with backslash escapes) and /* */ blocks spanning lines.
strip_comments='
{
  out = ""; n = length($0); i = 1
  while (i <= n) {
    c = substr($0, i, 1); d = substr($0, i, 2)
    if (block) {
      if (d == "*/") { block = 0; i += 2 } else i++
      continue
    }
    if (quote != "") {
      out = out c
      if (c == "\\") { out = out substr($0, i + 1, 1); i += 2; continue }
      if (c == quote) quote = ""
      i++; continue
    }
    if (d == "//") break
    if (d == "/*") { block = 1; i += 2; continue }
    # A quote after a digit is a digit separator (1'000'000), not a character literal.
    if (c == "\"" || (c == "\047" && substr($0, i - 1, 1) !~ /[0-9A-Fa-f]/)) quote = c
    out = out c; i++
  }
  quote = ""
  print out
}'

tmp=$(mktemp)
stripped=$(mktemp)
trap 'rm -f "$tmp" "$stripped"' EXIT
find "$root" -path "$root/platform" -prune -o -type f \
     \( -name '*.cpp' -o -name '*.cc' -o -name '*.c' -o -name '*.h' -o -name '*.hpp' -o -name '*.inc' \) -print |
  LC_ALL=C sort |
  # Only files whose raw text matches a pattern can match once comments are blanked: scan
  # those (one grep over all files instead of the scanner on each).
  tr '\n' '\0' | xargs -0 -r grep -lE "(${headers})|(${calls})|(${paths})" |
  while IFS= read -r file; do
    # Comments blanked out (string and character literals kept), line numbers kept.
    awk "$strip_comments" "$file" >"$stripped"
    for kind in header call path; do
      case $kind in
        header) pattern=$headers ;;
        call) pattern=$calls ;;
        path) pattern=$paths ;;
      esac
      # Calls are looked for outside string literals (their text is emptied); paths inside too.
      if [ "$kind" = call ]; then
        sed -e 's/"\([^"\\]\|\\.\)*"/""/g' "$stripped"
      else
        cat "$stripped"
      fi | grep -nE "$pattern" | while IFS= read -r hit; do
        line=${hit%%:*}
        text=$(sed -n "${line}p" "$file" | sed -e 's/^[[:space:]]*//')
        printf '%s:%s: [%s] %s\n' "${file#"$root"/}" "$line" "$kind" "$text"
      done
    done | sort -t: -k2,2n -u
  done >"$tmp"

count=$(wc -l <"$tmp" | tr -d ' ')
if [ "$count" -gt 0 ]; then
  cat "$tmp"
  echo "check_os_calls: ${count} line(s) outside src/platform/ use the OS directly; move them behind src/platform/" >&2
  exit 1
fi
echo "check_os_calls: no OS calls outside src/platform/"
exit 0
