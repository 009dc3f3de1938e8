# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The template's tests, a package: collected as `template.test_x`, so a test of yours in tests/ may have any
name, one of these too (your tests/test_memory.py beside this tests/template/test_memory.py). Their helpers
(support.py, ...) stay importable by their plain names, as tests/conftest.py puts this folder on sys.path; a test
here imports another test module of the template's relatively (`from .test_memory import ...`)."""
