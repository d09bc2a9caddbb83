"""The front door: the `splitlab` command line assembled from the lab's three packages."""
from vfl.inductor_env import set_aside_unusable_cache

set_aside_unusable_cache()          # before torch is imported: see vfl.inductor_env
