package compose
