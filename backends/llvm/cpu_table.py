"""The x86 CPUs the llvm backend knows by name and the features its kernels and LLVM's code
generation depend on (host_cpu.py checks -mcpu= and -isa= against it; runtime/jit.py's
PARTITA_LLVM_HOST pretends to be one of them). A leaf: it imports nothing of the backend."""

from __future__ import annotations

_V2 = {"+sse4.2", "+popcnt"}
_AVX = _V2 | {"+avx"}
_V3 = _AVX | {"+avx2", "+fma", "+bmi", "+bmi2", "+f16c"}
_AVXVNNI = _V3 | {"+avxvnni"}
_V4 = _V3 | {"+avx512f", "+avx512bw", "+avx512vl", "+avx512dq"}
_VNNI = _V4 | {"+avx512vnni"}
_AMX = _VNNI | {"+amx-int8", "+amx-tile"}

_GROUPS = {
    frozenset(): "x86-64 k8 opteron athlon64 core2 penryn bonnell atom",
    frozenset(_V2): "x86-64-v2 nehalem corei7 westmere silvermont slm goldmont goldmont-plus "
    "tremont amdfam10 barcelona btver1",
    frozenset(_AVX): "sandybridge corei7-avx ivybridge core-avx-i btver2 bdver1 bdver2 bdver3",
    frozenset(_V3): "x86-64-v3 haswell core-avx2 broadwell skylake znver1 znver2 znver3 bdver4",
    frozenset(_AVXVNNI): "alderlake raptorlake meteorlake gracemont arrowlake arrowlake-s "
    "lunarlake pantherlake sierraforest grandridge clearwaterforest",
    frozenset(_V4): "x86-64-v4 skylake-avx512 skx cannonlake",
    frozenset(_VNNI): "cascadelake cooperlake icelake-client icelake-server tigerlake rocketlake "
    "znver4 znver5",
    frozenset(_AMX): "sapphirerapids emeraldrapids graniterapids graniterapids-d diamondrapids",
}
CPU_FEATURES = {name: set(features) for features, names in _GROUPS.items()
                for name in names.split()}
