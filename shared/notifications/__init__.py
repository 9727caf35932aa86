"""Telling reviewers about suspensions: what a notification says, and its delivery records."""
