package server

import (
	"context"

	"github.com/termd/termd/daemon/recipes"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// RegisterRecipes registers the recipe service, a thin translation to recipes.Service.
func (s *Server) RegisterRecipes(r *recipes.Service) {
	termdv1.RegisterRecipeServiceServer(s.grpc, recipeSvc{r: r})
}

type recipeSvc struct {
	termdv1.UnimplementedRecipeServiceServer
	r *recipes.Service
}

func (s recipeSvc) ListRecipes(context.Context, *termdv1.ListRecipesRequest) (*termdv1.ListRecipesResponse, error) {
	return s.r.List(), nil
}

func (s recipeSvc) GetRecipe(_ context.Context, r *termdv1.GetRecipeRequest) (*termdv1.GetRecipeResponse, error) {
	return s.r.Get(r.Name)
}

func (s recipeSvc) ValidateRecipe(ctx context.Context, r *termdv1.ValidateRecipeRequest) (*termdv1.ValidateRecipeResponse, error) {
	return s.r.Validate(ctx, who(ctx), r)
}

func (s recipeSvc) RunRecipe(ctx context.Context, r *termdv1.RunRecipeRequest) (*termdv1.RunRecipeResponse, error) {
	return s.r.Run(ctx, who(ctx), r)
}
