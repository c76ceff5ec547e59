"""Newton methods for CRFs (Chen 2009; digest §3): a feature-based log-linear chain CRF, its
Hessian-vector product by a dynamic program and by autodiff, trust-region Newton (TRON) and the
full-batch peers it is measured against (L-BFGS, SciPy ``trust-ncg``, CRFsuite, Adam)."""
