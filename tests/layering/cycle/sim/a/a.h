// Fixture for tests/layering_check.cmake (never compiled): a file in a folder of the cyclic table.
#pragma once
