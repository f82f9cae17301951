"""The build's noise (issue 24): scripts/quiet-build.sh, which `make`
builds through unless V=1, prints one line per step (CC per file, LD per
link), none of make's directory lines or CMake's "Built target" lines,
nothing when the build is up to date, errors as they come, and the
build's exit status. Run on a two-file CMake project, as a sub-make (the
way `make run` runs it, where make prints its directories)."""
import os
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "quiet-build.sh")


def build(bdir):
    env = dict(os.environ, MAKELEVEL="1")
    return subprocess.run([SCRIPT, str(bdir), "-j", "2"], capture_output=True, text=True, env=env, timeout=300)


def test_quiet_build_prints_one_line_per_step(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.10)\nproject(q C)\nadd_library(a a.c)\n"
        "add_executable(b b.c)\ntarget_link_libraries(b a)\n")
    (src / "a.c").write_text("int a(void) { return 0; }\n")
    (src / "b.c").write_text("int a(void);\nint main(void) { return a(); }\n")
    bdir = tmp_path / "build"
    subprocess.run(["cmake", "-S", str(src), "-B", str(bdir)], check=True, capture_output=True, timeout=300)

    p = build(bdir)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines() == ["  CC      a.c", "  LD      liba.a", "  CC      b.c", "  LD      b"], p.stdout

    p = build(bdir)
    assert p.returncode == 0 and p.stdout == "", p.stdout  # up to date: nothing

    (src / "b.c").write_text("int main(void) { return nosuch; }\n")
    p = build(bdir)
    assert p.returncode != 0
    assert "nosuch" in p.stdout and "Entering directory" not in p.stdout, p.stdout
