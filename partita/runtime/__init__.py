"""partita.runtime: the Executable (a static schedule of compiled regions), profiles, and saved
executables.

    exe = partita.build(mod, "npu, llvm"); exe.run(x); exe.save("m.partita")
    exe = partita.load("m.partita")
"""

from partita.runtime.artifact import (
    ArtifactError,
    load_executable,
    load_executable_bytes,
    save_executable,
)
from partita.runtime.executable import Executable, InputError, Port, Step
from partita.runtime.profile import Profile, StepProfile
from partita.runtime.schedule import ScheduleError, plan_schedule

load = load_executable
load_bytes = load_executable_bytes

__all__ = [
    "ArtifactError",
    "Executable",
    "InputError",
    "Port",
    "Profile",
    "ScheduleError",
    "Step",
    "StepProfile",
    "load",
    "load_bytes",
    "load_executable",
    "load_executable_bytes",
    "plan_schedule",
    "save_executable",
]
