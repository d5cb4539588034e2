"""Statistics and models over measured results: confidence intervals, trust
warnings, scalability fits."""
