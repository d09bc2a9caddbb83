"""The front door: the `splitlab` command line assembled from the lab's three packages."""
