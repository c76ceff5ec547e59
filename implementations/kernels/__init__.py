"""Kernels written once for both frameworks, through the backend's ops namespace
(``implementations.ops``). A backend's method module imports them and adds only what its
framework does differently."""
