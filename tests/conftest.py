"""Shared test set-up: this folder is on sys.path (pytest's prepend mode), so test folders can
import the shared builders in common_graphs.py."""
