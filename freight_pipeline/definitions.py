"""The one Dagster ``Definitions`` object that ``workspace.yaml`` loads."""

import dagster as dg

defs = dg.Definitions()
